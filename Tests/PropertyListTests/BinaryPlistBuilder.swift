/// Builds `bplist00` files byte by byte, with every trailer field overridable, to make hostile inputs.
struct BinaryPlistBuilder {
    /// Encoded objects; an object's reference is its index.
    var objects: [[UInt8]] = []
    /// Bytes per object reference in arrays and dicts.
    var refSize = 1

    /// Appends an encoded object and returns its reference.
    @discardableResult
    mutating func add(_ object: [UInt8]) -> Int {
        objects.append(object)
        return objects.count - 1
    }

    /// Trailer fields to lie about; nil means the honest value.
    struct Overrides {
        var offsetIntSize: UInt8?
        var objectRefSize: UInt8?
        var numObjects: UInt64?
        var topObject: UInt64?
        var offsetTableStart: UInt64?
        /// Replaces one object's offset-table entry.
        var offset: (index: Int, value: UInt64)?
    }

    /// The whole file: header, objects, offset table (8-byte entries unless overridden), trailer.
    func bytes(top: Int = 0, offsetIntSize: Int = 8, _ overrides: Overrides = Overrides()) -> [UInt8] {
        var out = Array("bplist00".utf8)
        var offsets: [UInt64] = []
        for object in objects {
            offsets.append(UInt64(out.count))
            out += object
        }
        if let (index, value) = overrides.offset { offsets[index] = value }
        let tableStart = UInt64(out.count)
        for offset in offsets { out += Self.bigEndian(offset, size: offsetIntSize) }
        out += [0, 0, 0, 0, 0, 0]
        out.append(overrides.offsetIntSize ?? UInt8(offsetIntSize))
        out.append(overrides.objectRefSize ?? UInt8(refSize))
        out += Self.bigEndian(overrides.numObjects ?? UInt64(objects.count), size: 8)
        out += Self.bigEndian(overrides.topObject ?? UInt64(top), size: 8)
        out += Self.bigEndian(overrides.offsetTableStart ?? tableStart, size: 8)
        return out
    }

    static func bigEndian(_ value: UInt64, size: Int) -> [UInt8] {
        (0..<size).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    /// A type nibble with its count, using the 0x_F + int form for 15 and more.
    static func marker(_ type: UInt8, count: Int) -> [UInt8] {
        count < 15 ? [type << 4 | UInt8(count)] : [type << 4 | 0x0F, 0x13] + bigEndian(UInt64(count), size: 8)
    }

    static func ascii(_ text: String) -> [UInt8] { marker(0x5, count: text.utf8.count) + Array(text.utf8) }
    static func utf16(_ text: String) -> [UInt8] {
        let units = Array(text.utf16)
        return marker(0x6, count: units.count) + units.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }
    static func int(_ value: Int64) -> [UInt8] { [0x13] + bigEndian(UInt64(bitPattern: value), size: 8) }
    static func real(_ value: Double) -> [UInt8] { [0x23] + bigEndian(value.bitPattern, size: 8) }
    static func date(_ seconds: Double) -> [UInt8] { [0x33] + bigEndian(seconds.bitPattern, size: 8) }
    static func data(_ bytes: [UInt8]) -> [UInt8] { marker(0x4, count: bytes.count) + bytes }
    static let `true`: [UInt8] = [0x09]
    static let `false`: [UInt8] = [0x08]

    func array(_ refs: [Int]) -> [UInt8] {
        Self.marker(0xA, count: refs.count) + refs.flatMap { Self.bigEndian(UInt64($0), size: refSize) }
    }

    func dict(_ keys: [Int], _ values: [Int]) -> [UInt8] {
        Self.marker(0xD, count: keys.count) + (keys + values).flatMap { Self.bigEndian(UInt64($0), size: refSize) }
    }
}
