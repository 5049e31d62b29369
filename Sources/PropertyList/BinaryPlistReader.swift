import Foundation

/// A bounds-checked reader for `bplist00` files.
///
/// Works in two passes so hostile files cost little: `measure` walks the object graph once per object
/// (memoised), refusing cycles, deep nesting and graphs that would expand past `maxObjects`; only then does
/// `build` materialise the values, counting every visit.
struct BinaryPlistReader {
    let bytes: [UInt8]
    let limits: PlistLimits

    // From the trailer.
    private var offsetIntSize = 0
    private var objectRefSize = 0
    private var objectCount = 0
    private var topObject = 0
    private var offsetTableStart = 0

    /// Object offsets, each checked to lie in the object area.
    private var offsets: [Int] = []
    /// Values a reference expands to (saturating at maxObjects + 1), once measured.
    private var expandedSize: [Int] = []
    /// Container levels within each measured object (0 for leaves), to check depth on memoised hits.
    private var height: [Int] = []
    /// Objects on the current path of `measure`, for cycle detection.
    private var onPath: [Bool] = []
    /// Values built so far.
    private var built = 0

    init(bytes: [UInt8], limits: PlistLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    /// One object's header: its type nibble and where and how long its payload is.
    private struct Header {
        var marker: UInt8
        var count: Int
        var payload: Int
        var type: UInt8 { marker >> 4 }
        var info: UInt8 { marker & 0x0F }
    }

    mutating func decode() throws(PlistError) -> PlistValue {
        try readTrailer()
        try readOffsetTable()
        expandedSize = Array(repeating: -1, count: objectCount)
        onPath = Array(repeating: false, count: objectCount)
        height = Array(repeating: 0, count: objectCount)
        let total = try measure(topObject, depth: 0)
        guard total <= limits.maxObjects else {
            throw PlistError(.limit, "binary plist expands to more than \(limits.maxObjects) values")
        }
        return try build(topObject)
    }

    // MARK: - Trailer and offset table

    private mutating func readTrailer() throws(PlistError) {
        // Header, at least one object byte, the offset table (>= 1 byte) and the 32-byte trailer.
        guard bytes.count >= 8 + 1 + 1 + 32 else {
            throw PlistError(.malformed, "binary plist truncated: \(bytes.count) bytes is too short for a trailer")
        }
        let trailer = bytes.count - 32
        offsetIntSize = Int(bytes[trailer + 6])
        objectRefSize = Int(bytes[trailer + 7])
        let objects = readUInt64(at: trailer + 8, size: 8)
        let top = readUInt64(at: trailer + 16, size: 8)
        let tableStart = readUInt64(at: trailer + 24, size: 8)

        guard (1...8).contains(offsetIntSize) else {
            throw PlistError(.malformed, "binary plist trailer: offset size \(offsetIntSize) is not 1 to 8")
        }
        guard (1...8).contains(objectRefSize) else {
            throw PlistError(.malformed, "binary plist trailer: object reference size \(objectRefSize) is not 1 to 8")
        }
        guard objects > 0 else {
            throw PlistError(.malformed, "binary plist trailer: no objects")
        }
        guard objects <= UInt64(max(0, limits.maxObjects)) else {
            throw PlistError(.limit, "binary plist trailer: \(objects) objects, more than the limit of \(limits.maxObjects)")
        }
        guard top < objects else {
            throw PlistError(.malformed, "binary plist trailer: top object \(top) is not below the object count \(objects)")
        }
        guard tableStart >= 9, tableStart < UInt64(trailer) else {
            throw PlistError(.malformed, "binary plist trailer: offset table start \(tableStart) is outside the file")
        }
        objectCount = Int(objects)
        topObject = Int(top)
        offsetTableStart = Int(tableStart)
        let (tableSize, overflow1) = objectCount.multipliedReportingOverflow(by: offsetIntSize)
        let (tableEnd, overflow2) = offsetTableStart.addingReportingOverflow(tableSize)
        guard !overflow1, !overflow2, tableEnd <= trailer else {
            throw PlistError(.malformed, "binary plist trailer: offset table of \(objectCount) x \(offsetIntSize) bytes at \(offsetTableStart) runs past the trailer")
        }
    }

    private mutating func readOffsetTable() throws(PlistError) {
        offsets.reserveCapacity(objectCount)
        for index in 0..<objectCount {
            let offset = readUInt64(at: offsetTableStart + index * offsetIntSize, size: offsetIntSize)
            guard offset >= 8, offset < UInt64(offsetTableStart) else {
                throw PlistError(.malformed, "binary plist: object \(index) has offset \(offset), outside the object area 8..<\(offsetTableStart)")
            }
            offsets.append(Int(offset))
        }
    }

    /// Big-endian unsigned integer; callers have checked that `offset + size` is in bounds.
    private func readUInt64(at offset: Int, size: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in offset..<(offset + size) {
            value = value << 8 | UInt64(bytes[index])
        }
        return value
    }

    // MARK: - Object headers

    /// Reads the marker and, for sized types, the count (inline nibble or a following int object).
    private func header(_ ref: Int) throws(PlistError) -> Header {
        let offset = offsets[ref]
        let marker = bytes[offset]
        var header = Header(marker: marker, count: Int(marker & 0x0F), payload: offset + 1)
        switch marker >> 4 {
        case 0x4, 0x5, 0x6, 0x7, 0xA, 0xD:
            guard header.info == 0x0F else { break }
            // 0x_F: the count follows as an int object 0x1n of 2^n bytes.
            let sizeOffset = offset + 1
            guard sizeOffset < offsetTableStart else {
                throw malformed(ref, offset, "length marker runs past the object area")
            }
            let sizeMarker = bytes[sizeOffset]
            guard sizeMarker >> 4 == 0x1, sizeMarker & 0x0F <= 3 else {
                throw malformed(ref, offset, String(format: "bad length marker 0x%02X", sizeMarker))
            }
            let sizeBytes = 1 << Int(sizeMarker & 0x0F)
            try need(ref, offset, from: sizeOffset + 1, count: sizeBytes)
            let count = readUInt64(at: sizeOffset + 1, size: sizeBytes)
            guard count <= UInt64(Int.max) else {
                throw malformed(ref, offset, "length \(count) is too large")
            }
            header.count = Int(count)
            header.payload = sizeOffset + 1 + sizeBytes
        default:
            break
        }
        return header
    }

    /// Checks that `count` bytes from `start` lie in the object area, with overflow-checked arithmetic.
    private func need(_ ref: Int, _ offset: Int, from start: Int, count: Int) throws(PlistError) {
        let (end, overflow) = start.addingReportingOverflow(count)
        guard count >= 0, !overflow, end <= offsetTableStart else {
            throw malformed(ref, offset, "\(count) bytes at \(start) run past the object area (ends at \(offsetTableStart))")
        }
    }

    /// The byte span of `count` elements of `size` bytes, checked.
    private func span(_ ref: Int, _ header: Header, elementSize: Int, elements: Int) throws(PlistError) -> Range<Int> {
        let (length, overflow) = elements.multipliedReportingOverflow(by: elementSize)
        guard !overflow else {
            throw malformed(ref, offsets[ref], "length \(elements) x \(elementSize) bytes overflows")
        }
        try need(ref, offsets[ref], from: header.payload, count: length)
        return header.payload..<(header.payload + length)
    }

    /// The object references of an array (`elements`) or dict (`2 * elements`), each checked.
    private func references(_ ref: Int, _ header: Header, elements: Int) throws(PlistError) -> [Int] {
        let range = try span(ref, header, elementSize: objectRefSize, elements: elements)
        var result: [Int] = []
        result.reserveCapacity(elements)
        var position = range.lowerBound
        while position < range.upperBound {
            let child = readUInt64(at: position, size: objectRefSize)
            guard child < UInt64(objectCount) else {
                throw malformed(ref, offsets[ref], "reference \(child) is not below the object count \(objectCount)")
            }
            result.append(Int(child))
            position += objectRefSize
        }
        return result
    }

    /// The references a container holds (keys then values for a dict); empty for leaves.
    private func children(_ ref: Int, _ header: Header) throws(PlistError) -> [Int] {
        switch header.type {
        case 0xA:
            return try references(ref, header, elements: header.count)
        case 0xD:
            let (both, overflow) = header.count.multipliedReportingOverflow(by: 2)
            guard !overflow else { throw malformed(ref, offsets[ref], "dictionary size \(header.count) overflows") }
            return try references(ref, header, elements: both)
        default:
            return []
        }
    }

    private func malformed(_ ref: Int, _ offset: Int, _ message: String) -> PlistError {
        PlistError(.malformed, "binary plist object \(ref) at offset \(offset): \(message)")
    }

    // MARK: - Pass 1: measure

    /// How many values `ref` expands to, saturating above maxObjects; refuses cycles and deep nesting.
    private mutating func measure(_ ref: Int, depth: Int) throws(PlistError) -> Int {
        if expandedSize[ref] >= 0 {
            // Shared objects may be reached deeper than where they were first measured.
            guard depth + height[ref] <= limits.maxDepth else { throw tooDeep(ref) }
            return expandedSize[ref]
        }
        guard !onPath[ref] else {
            throw malformed(ref, offsets[ref], "cycle: the object contains itself")
        }
        let header = try header(ref)
        guard header.type == 0xA || header.type == 0xD else {
            expandedSize[ref] = 1
            return 1
        }
        guard depth < limits.maxDepth else { throw tooDeep(ref) }
        onPath[ref] = true
        var total = 1
        var levels = 0
        for child in try children(ref, header) {
            let (sum, overflow) = total.addingReportingOverflow(try measure(child, depth: depth + 1))
            // Only reachable when maxObjects is near Int.max ("no limit"): refuse rather than trap.
            guard !overflow else {
                throw PlistError(.limit, "binary plist expands to more than \(Int.max) values")
            }
            total = sum
            levels = max(levels, height[child])
            // Saturate: beyond the limit the exact size no longer matters, and sums cannot overflow.
            if total > limits.maxObjects {
                total = limits.maxObjects + 1
                break
            }
        }
        onPath[ref] = false
        expandedSize[ref] = total
        height[ref] = levels + 1
        return total
    }

    private func tooDeep(_ ref: Int) -> PlistError {
        PlistError(.limit, "binary plist object \(ref) at offset \(offsets[ref]): nesting deeper than the limit of \(limits.maxDepth)")
    }

    // MARK: - Pass 2: build

    private mutating func build(_ ref: Int) throws(PlistError) -> PlistValue {
        built += 1
        guard built <= limits.maxObjects else {
            throw PlistError(.limit, "binary plist expands to more than \(limits.maxObjects) values")
        }
        let header = try header(ref)
        let offset = offsets[ref]
        switch header.type {
        case 0x0:
            switch header.marker {
            case 0x08: return .boolean(false)
            case 0x09: return .boolean(true)
            default: throw malformed(ref, offset, String(format: "unsupported marker 0x%02X (null or fill)", header.marker))
            }
        case 0x1:
            return .integer(try integer(ref, header))
        case 0x2:
            switch header.info {
            case 2:
                let range = try span(ref, header, elementSize: 4, elements: 1)
                return .real(Double(Float(bitPattern: UInt32(readUInt64(at: range.lowerBound, size: 4)))))
            case 3:
                let range = try span(ref, header, elementSize: 8, elements: 1)
                return .real(Double(bitPattern: readUInt64(at: range.lowerBound, size: 8)))
            default:
                throw malformed(ref, offset, "real of \(1 << Int(header.info)) bytes is not supported")
            }
        case 0x3:
            guard header.marker == 0x33 else {
                throw malformed(ref, offset, String(format: "unsupported date marker 0x%02X", header.marker))
            }
            let range = try span(ref, header, elementSize: 8, elements: 1)
            let seconds = Double(bitPattern: readUInt64(at: range.lowerBound, size: 8))
            guard seconds.isFinite else { throw malformed(ref, offset, "date is not a finite number") }
            return .date(Date(timeIntervalSinceReferenceDate: seconds))
        case 0x4:
            return .data(Array(bytes[try span(ref, header, elementSize: 1, elements: header.count)]))
        case 0x5, 0x6, 0x7:
            return .string(try string(ref, header))
        case 0xA:
            var values: [PlistValue] = []
            values.reserveCapacity(header.count)
            for child in try children(ref, header) {
                values.append(try build(child))
            }
            return .array(values)
        case 0xD:
            let refs = try children(ref, header)
            var entries: [PlistDictionary.Entry] = []
            entries.reserveCapacity(header.count)
            var seen = Set<String>()
            for index in 0..<header.count {
                let keyRef = refs[index]
                built += 1
                guard built <= limits.maxObjects else {
                    throw PlistError(.limit, "binary plist expands to more than \(limits.maxObjects) values")
                }
                let keyHeader = try self.header(keyRef)
                guard (0x5...0x7).contains(keyHeader.type) else {
                    throw malformed(ref, offset, "key \(index) (object \(keyRef)) is not a string")
                }
                let key = try string(keyRef, keyHeader)
                guard seen.insert(key).inserted else {
                    throw PlistError(.duplicateKey, "binary plist object \(ref) at offset \(offset): duplicate key '\(XMLPlistReader.clip(key))'")
                }
                entries.append(PlistDictionary.Entry(key: key, value: try build(refs[header.count + index])))
            }
            return .dictionary(PlistDictionary(entries))
        case 0x8:
            throw malformed(ref, offset, "UID objects (keyed archives) are not supported")
        case 0xB, 0xC:
            throw malformed(ref, offset, "sets are not supported")
        default:
            throw malformed(ref, offset, String(format: "unknown marker 0x%02X", header.marker))
        }
    }

    /// 1, 2 and 4-byte ints are unsigned, 8-byte ones signed; 16-byte ones only when they fit in 64 bits.
    private func integer(_ ref: Int, _ header: Header) throws(PlistError) -> Int64 {
        guard header.info <= 4 else {
            throw malformed(ref, offsets[ref], "integer of \(1 << Int(header.info)) bytes is not supported")
        }
        let size = 1 << Int(header.info)
        let range = try span(ref, header, elementSize: size, elements: 1)
        guard size == 16 else {
            return Int64(bitPattern: readUInt64(at: range.lowerBound, size: size))
        }
        let high = readUInt64(at: range.lowerBound, size: 8)
        let low = readUInt64(at: range.lowerBound + 8, size: 8)
        let signExtension: UInt64 = Int64(bitPattern: low) < 0 ? .max : 0
        guard high == signExtension else {
            throw malformed(ref, offsets[ref], "128-bit integer does not fit in 64 bits")
        }
        return Int64(bitPattern: low)
    }

    /// ASCII (0x5n), UTF-16BE (0x6n, count in code units) or UTF-8 (0x7n) text, validated.
    private func string(_ ref: Int, _ header: Header) throws(PlistError) -> String {
        let offset = offsets[ref]
        switch header.type {
        case 0x5:
            let slice = bytes[try span(ref, header, elementSize: 1, elements: header.count)]
            guard slice.allSatisfy({ $0 < 0x80 }) else { throw malformed(ref, offset, "ASCII string has non-ASCII bytes") }
            return String(decoding: slice, as: UTF8.self)
        case 0x6:
            let range = try span(ref, header, elementSize: 2, elements: header.count)
            var units: [UInt16] = []
            units.reserveCapacity(header.count)
            for position in stride(from: range.lowerBound, to: range.upperBound, by: 2) {
                units.append(UInt16(bytes[position]) << 8 | UInt16(bytes[position + 1]))
            }
            var scalars = String.UnicodeScalarView()
            var iterator = units.makeIterator()
            var decoder = UTF16()
            while true {
                switch decoder.decode(&iterator) {
                case .scalarValue(let scalar): scalars.append(scalar)
                case .emptyInput: return String(scalars)
                case .error: throw malformed(ref, offset, "UTF-16 string has an unpaired surrogate")
                }
            }
        default:
            let slice = Array(bytes[try span(ref, header, elementSize: 1, elements: header.count)])
            guard let text = String(validating: slice, as: UTF8.self) else {
                throw malformed(ref, offset, "UTF-8 string is not valid UTF-8")
            }
            return text
        }
    }
}
