import Foundation
import Testing
@testable import PropertyList

@Suite("Binary property list reading")
struct BinaryPlistReaderTests {
    typealias B = BinaryPlistBuilder

    /// A one-element array holding one leaf, the smallest container file.
    func arrayOf(_ leaf: [UInt8]) -> [UInt8] {
        var b = B()
        b.add(b.array([1]))
        b.add(leaf)
        return b.bytes()
    }

    func expectMalformed(_ bytes: [UInt8], mentioning fragment: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let error = Fixtures.error(bytes)
        #expect(error?.kind == .malformed, sourceLocation: sourceLocation)
        #expect(error?.message.contains(fragment) == true, "\(String(describing: error))", sourceLocation: sourceLocation)
    }

    @Test("the same ContentInfo in XML and binary gives equal values")
    func contentInfoBothFormats() throws {
        let xml = try PropertyList.decode(Fixtures.utf8(Fixtures.contentInfoXML))
        let binary = try PropertyList.decode(Fixtures.contentInfoBinary)
        #expect(binary.format == .binary)
        #expect(binary.value == xml.value)
        #expect(binary.value == Fixtures.contentInfo)
    }

    @Test("a binary plist written by Foundation decodes to the same content")
    func foundationWritten() throws {
        let source: [String: Any] = [
            "IAPProductIdentifier": "com.example.pack", "ContentVersion": "2.0", "Count": 7, "Ratio": 0.25,
            "Files": ["a.txt", "b/é.png"], "Blob": Data([1, 2, 3]), "Flag": false,
            "When": Date(timeIntervalSinceReferenceDate: 800_000_000), "Nested": ["Deep": ["x": -5]],
        ]
        let data = try PropertyListSerialization.data(fromPropertyList: source, format: .binary, options: 0)
        let (value, format) = try PropertyList.decode(Array(data))
        #expect(format == .binary)
        guard case .dictionary(let dictionary) = value else { Issue.record("not a dictionary"); return }
        #expect(Set(dictionary.keys) == Set(source.keys))
        #expect(dictionary["IAPProductIdentifier"] == .string("com.example.pack"))
        #expect(dictionary["Count"] == .integer(7))
        #expect(dictionary["Ratio"] == .real(0.25))
        #expect(dictionary["Files"] == .array([.string("a.txt"), .string("b/é.png")]))
        #expect(dictionary["Blob"] == .data([1, 2, 3]))
        #expect(dictionary["Flag"] == .boolean(false))
        #expect(dictionary["When"] == .date(Date(timeIntervalSinceReferenceDate: 800_000_000)))
        #expect(dictionary["Nested"] == .dictionary(PlistDictionary([
            .init(key: "Deep", value: .dictionary(PlistDictionary([.init(key: "x", value: .integer(-5))]))),
        ])))
    }

    @Test("every supported object type decodes")
    func everyType() throws {
        var b = B()
        b.refSize = 2
        let leaves: [[UInt8]] = [
            [0x10, 0xFF], [0x11, 0x01, 0x00], [0x12, 0xFF, 0xFF, 0xFF, 0xFF], B.int(-3),
            [0x14] + [UInt8](repeating: 0xFF, count: 16),  // 16-byte -1
            [0x14] + [UInt8](repeating: 0, count: 8) + B.bigEndian(5, size: 8),
            [0x22] + B.bigEndian(UInt64(Float(1.5).bitPattern), size: 4), B.real(-0.125),
            B.true, B.false, B.date(-1.5), B.data([9, 8, 7]), B.data([UInt8](repeating: 0xAB, count: 20)),
            B.ascii("plain"), B.ascii(String(repeating: "x", count: 30)), B.utf16("héllo 😀"),
            [0x72] + Array("é".utf8),
        ]
        b.add([])
        let refs = leaves.map { b.add($0) }
        b.objects[0] = b.array(refs)
        let (value, _) = try PropertyList.decode(b.bytes(offsetIntSize: 2))
        #expect(value == .array([
            .integer(255), .integer(256), .integer(4_294_967_295), .integer(-3), .integer(-1), .integer(5),
            .real(1.5), .real(-0.125), .boolean(true), .boolean(false),
            .date(Date(timeIntervalSinceReferenceDate: -1.5)), .data([9, 8, 7]),
            .data([UInt8](repeating: 0xAB, count: 20)),
            .string("plain"), .string(String(repeating: "x", count: 30)), .string("héllo 😀"), .string("é"),
        ]))
    }

    @Test("unsupported or invalid objects are malformed, naming the object", arguments: [
        ([0x00], "null"), ([0x0F], "fill"), ([0x80, 0x01], "UID"), ([0xC0], "sets"), ([0xB0], "sets"),
        ([0x15] + [UInt8](repeating: 0, count: 32), "integer of 32 bytes"),
        ([0x14] + [0, 0, 0, 0, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 8), "128-bit"),
        ([0x24] + [UInt8](repeating: 0, count: 16), "real of 16 bytes"),
        ([0x33] + B.bigEndian(Double.nan.bitPattern, size: 8), "finite"),
        ([0x52, 0xC3, 0xA9], "non-ASCII"), ([0x61, 0xD8, 0x00], "surrogate"), ([0x71, 0xFF], "UTF-8"),
        ([0xE0], "unknown marker"),
    ] as [([UInt8], String)])
    func unsupported(leaf: [UInt8], fragment: String) {
        expectMalformed(arrayOf(leaf), mentioning: fragment)
        expectMalformed(arrayOf(leaf), mentioning: "object 1 at offset 10")
    }

    @Test("trailer fields are each checked")
    func badTrailer() {
        let good = arrayOf(B.true)
        #expect(Fixtures.error(good) == nil)
        var b = B()
        b.add(b.array([1]))
        b.add(B.true)
        typealias O = B.Overrides
        let cases: [(O, PlistError.Kind, String)] = [
            (O(offsetIntSize: 0), .malformed, "offset size 0"),
            (O(offsetIntSize: 9), .malformed, "offset size 9"),
            (O(objectRefSize: 0), .malformed, "reference size 0"),
            (O(objectRefSize: 9), .malformed, "reference size 9"),
            (O(numObjects: 0), .malformed, "no objects"),
            (O(numObjects: 5_000_000), .limit, "5000000 objects"),
            (O(numObjects: 3), .malformed, "runs past the trailer"),
            (O(topObject: 2), .malformed, "top object 2"),
            (O(offsetTableStart: 4), .malformed, "offset table start 4"),
            (O(offsetTableStart: 10_000), .malformed, "offset table start 10000"),
            (O(offsetTableStart: UInt64.max - 7), .malformed, "outside the file"),
        ]
        for (overrides, kind, fragment) in cases {
            let error = Fixtures.error(b.bytes(overrides))
            #expect(error?.kind == kind, "\(fragment)")
            #expect(error?.message.contains(fragment) == true, "\(String(describing: error))")
        }
    }

    @Test("an offset table whose size overflows is refused")
    func offsetTableOverflow() {
        var b = B()
        b.add(B.true)
        // 2^62 objects of 8 bytes each overflow Int; raise maxObjects so the overflow check is what stops it.
        let bytes = b.bytes(B.Overrides(numObjects: 1 << 62))
        let error = Fixtures.error(bytes, limits: PlistLimits(maxObjects: .max))
        #expect(error?.kind == .malformed)
        #expect(error?.message.contains("runs past the trailer") == true)
    }

    @Test("an object offset outside the object area is refused")
    func offsetOutOfBounds() {
        var b = B()
        b.add(b.array([1]))
        b.add(B.true)
        for bad: UInt64 in [3, 1_000, UInt64.max] {
            expectMalformed(b.bytes(B.Overrides(offset: (1, bad))), mentioning: "object 1 has offset \(bad)")
        }
    }

    @Test("a reference past the object count is refused")
    func refOutOfRange() {
        var b = B()
        b.add(b.array([1, 7]))
        b.add(B.true)
        expectMalformed(b.bytes(), mentioning: "reference 7")
    }

    @Test("an array containing itself is a cycle")
    func cycle() {
        var b = B()
        b.add(b.array([0]))
        expectMalformed(b.bytes(), mentioning: "cycle")
        // A longer loop through a dictionary value.
        var c = B()
        c.add(c.array([1]))
        c.add(c.dict([2], [0]))
        c.add(B.ascii("k"))
        expectMalformed(c.bytes(), mentioning: "cycle")
    }

    @Test("an exponential DAG is refused as a limit without expanding it")
    func exponentialDAG() {
        var b = B()
        for level in 0..<30 { b.add(b.array([level + 1, level + 1])) }
        b.add(B.true)
        let error = Fixtures.error(b.bytes())
        #expect(error?.kind == .limit)
        // A small shared DAG within the limit still decodes, each visit counted.
        var small = B()
        for level in 0..<3 { small.add(small.array([level + 1, level + 1])) }
        small.add(B.true)
        #expect(Fixtures.error(small.bytes(), limits: PlistLimits(maxObjects: 15)) == nil)
        #expect(Fixtures.error(small.bytes(), limits: PlistLimits(maxObjects: 14))?.kind == .limit)
    }

    @Test("nesting is limited, also when a shared object is reached deeper than first seen")
    func depth() {
        var chain = B()
        for level in 0..<100 { chain.add(chain.array([level + 1])) }
        chain.add(B.true)
        #expect(Fixtures.error(chain.bytes())?.kind == .limit)

        // Top = [shared, a1]; a1 -> a2 -> a3 -> shared; shared = [[true]] (two levels).
        var b = B()
        b.add(b.array([1, 3]))  // 0: top
        b.add(b.array([2]))  // 1: shared
        b.add(b.array([6]))  // 2: shared's inner array
        b.add(b.array([4]))  // 3
        b.add(b.array([5]))  // 4
        b.add(b.array([1]))  // 5 -> shared
        b.add(B.true)  // 6
        #expect(Fixtures.error(b.bytes(), limits: PlistLimits(maxDepth: 6)) == nil)
        #expect(Fixtures.error(b.bytes(), limits: PlistLimits(maxDepth: 5))?.kind == .limit)
    }

    @Test("a string length claiming 2^62 bytes is refused")
    func stringLengthOverflow() {
        for type: UInt8 in [0x5, 0x6, 0x4, 0xA, 0xD] {
            let leaf = [type << 4 | 0x0F, 0x13] + B.bigEndian(1 << 62, size: 8)
            let error = Fixtures.error(arrayOf(leaf))
            #expect(error?.kind == .malformed, "type \(type)")
            #expect(error?.message.contains("object 1") == true)
        }
        // A length marker that is not an int.
        expectMalformed(arrayOf([0x5F, 0x23]), mentioning: "bad length marker 0x23")
    }

    @Test("dictionary keys must be strings and unique")
    func dictionaryKeys() {
        var b = B()
        b.add(b.dict([1, 2], [3, 3]))
        b.add(B.ascii("Files"))
        b.add(B.utf16("Files"))
        b.add(B.true)
        let error = Fixtures.error(b.bytes())
        #expect(error?.kind == .duplicateKey)
        #expect(error?.message.contains("'Files'") == true)

        var c = B()
        c.add(c.dict([1], [1]))
        c.add(B.int(1))
        expectMalformed(c.bytes(), mentioning: "not a string")
    }

    @Test("every truncation of a valid file is refused, never crashes")
    func truncated() {
        let bytes = Fixtures.contentInfoBinary
        for length in 8..<bytes.count {
            let error = Fixtures.error(Array(bytes[..<length]))
            #expect(error != nil, "length \(length)")
            #expect(error?.kind == .malformed || error?.kind == .limit, "length \(length): \(String(describing: error))")
        }
        expectMalformed(Array("bplist00".utf8) + [0x09], mentioning: "truncated")
    }

    @Test("a binary file over maxBytes is refused before parsing")
    func maxBytes() {
        let bytes = Fixtures.contentInfoBinary
        let error = Fixtures.error(bytes, limits: PlistLimits(maxBytes: bytes.count - 1))
        #expect(error?.kind == .limit)
    }
}
