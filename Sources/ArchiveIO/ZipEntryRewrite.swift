public import FileSystemIO

/// Rewrites a zip's first entry, whose data libarchive wrote as reserved: a build that hashes its sources
/// while writing them reserves ContentInfo.plist (first, stored, digests zeroed), and once the digests are
/// known writes the real one over it. Same length, so only the data and its CRC-32 change: in the data
/// descriptor (or the local header) and in the central directory record.
///
/// Every field is checked against what was reserved before a byte is written; a layout that does not match
/// (another libarchive, a bug) fails the build rather than leave an archive whose plist does not match its CRC.
public enum ZipEntryRewrite {
    private static let localHeaderSignature: UInt32 = 0x0403_4b50
    private static let descriptorSignature: UInt32 = 0x0807_4b50
    private static let centralHeaderSignature: UInt32 = 0x0201_4b50
    private static let endSignature: UInt32 = 0x0605_4b50
    private static let zip64LocatorSignature: UInt32 = 0x0706_4b50
    private static let zip64EndSignature: UInt32 = 0x0606_4b50

    static func layoutError(_ what: String, path: String) -> HCPackError {
        HCPackError(.io, "\(path): \(what) is not where the build left it; nothing was written, report this as a bug", path: path)
    }

    /// Replaces the first entry's data (`reserved`, stored) with the bytes `final` gives, and its CRC-32 in the
    /// data descriptor or local header. The central directory is `patchedCentralRecord`'s or
    /// `replaceCentralCRC`'s job.
    /// - Parameters:
    ///   - descriptor: the archive, open for reading and writing, written at least past the first entry.
    ///   - path: how messages name it.
    ///   - name: the first entry's name, checked in its header.
    ///   - reserved: the bytes written first.
    ///   - final: the final bytes of a range of `reserved` (same length), asked for `windowSize` at a time.
    ///   - finalCRC: the final bytes' CRC-32, computed once by the caller.
    /// - Throws: `HCPackError` `.io` when the archive is not laid out as reserved, or a read or write fails.
    public static func replaceFirstEntryData(
        in descriptor: Int32, path: String, name: String, reserved: [UInt8], windowSize: Int,
        final: (Range<Int>) -> [UInt8], finalCRC: UInt32
    ) throws(HCPackError) {
        let file = PositionedFile(descriptor: descriptor, path: path)

        // Local header: signature, flags, method, CRC, sizes, name and extra lengths, then name, extra, data.
        let local = try file.read(30, at: 0)
        let nameBytes = Array(name.utf8)
        guard local.uint32(at: 0) == localHeaderSignature, local.uint16(at: 8) == 0,
            Int(local.uint16(at: 26)) == nameBytes.count, try file.read(nameBytes.count, at: 30) == nameBytes
        else { throw layoutError("\(name)'s local header", path: path) }
        let dataStart = Int64(30 + nameBytes.count + Int(local.uint16(at: 28)))
        guard try file.matches(reserved, at: dataStart) else { throw layoutError("\(name)'s data", path: path) }
        let dataEnd = dataStart + Int64(reserved.count)

        // Bit 3: the CRC follows the data (after an optional signature); otherwise it is in the local header.
        let crcOffset: Int64
        if local.uint16(at: 6) & 0x8 != 0 {
            let descriptorHead = try file.read(8, at: dataEnd)
            crcOffset = descriptorHead.uint32(at: 0) == descriptorSignature ? dataEnd + 4 : dataEnd
        } else {
            crcOffset = 14
        }
        guard try file.read(4, at: crcOffset).uint32(at: 0) == CRC32.checksum(reserved) else {
            throw layoutError("\(name)'s CRC-32", path: path)
        }
        for window in stride(from: 0, to: reserved.count, by: windowSize) {
            let range = window..<min(window + windowSize, reserved.count)
            try file.write(final(range), at: dataStart + Int64(window))
        }
        try file.write(littleEndianBytes(finalCRC), at: crcOffset)
    }

    /// `bytes` with the CRC-32 replaced when they start with the central directory record of the first entry,
    /// `name`, holding `reservedCRC`; nil for anything else. For the central directory as libarchive hands it
    /// over, before it is written: the stream can then be hashed as written.
    public static func patchedCentralRecord(
        _ bytes: UnsafeRawBufferPointer, name: [UInt8], reservedCRC: UInt32, finalCRC: UInt32
    ) -> [UInt8]? {
        guard bytes.count >= 46 + name.count else { return nil }
        let head = [UInt8](bytes.prefix(46))
        guard head.uint32(at: 0) == centralHeaderSignature, head.uint32(at: 16) == reservedCRC, head.uint32(at: 42) == 0,
            Int(head.uint16(at: 28)) == name.count, bytes[46..<(46 + name.count)].elementsEqual(name)
        else { return nil }
        var patched = [UInt8](bytes)
        patched.replaceSubrange(16..<20, with: littleEndianBytes(finalCRC))
        return patched
    }

    /// Replaces the CRC-32 of the first entry, `name`, in the central directory of a finished archive.
    /// - Throws: `HCPackError` `.io` when the record is not there holding `reservedCRC`, or a read or write fails.
    public static func replaceCentralCRC(
        in descriptor: Int32, path: String, name: String, reservedCRC: UInt32, finalCRC: UInt32
    ) throws(HCPackError) {
        let file = PositionedFile(descriptor: descriptor, path: path)
        // Its offset is in the end record (libarchive writes no comment), or in the Zip64 one.
        let size = try file.size()
        guard size >= 22 else { throw layoutError("the end record", path: path) }
        let end = try file.read(22, at: size - 22)
        guard end.uint32(at: 0) == endSignature else { throw layoutError("the end record", path: path) }
        var directoryOffset = Int64(end.uint32(at: 16))
        if directoryOffset == 0xFFFF_FFFF {
            guard size >= 42 else { throw layoutError("the Zip64 end record", path: path) }
            let locator = try file.read(20, at: size - 42)
            guard locator.uint32(at: 0) == zip64LocatorSignature else { throw layoutError("the Zip64 end locator", path: path) }
            let zip64End = try file.read(56, at: Int64(bitPattern: locator.uint64(at: 8)))
            guard zip64End.uint32(at: 0) == zip64EndSignature else { throw layoutError("the Zip64 end record", path: path) }
            directoryOffset = Int64(bitPattern: zip64End.uint64(at: 48))
        }
        let nameBytes = Array(name.utf8)
        let record = try file.read(46 + nameBytes.count, at: directoryOffset)
        let patched = record.withUnsafeBytes {
            patchedCentralRecord($0, name: nameBytes, reservedCRC: reservedCRC, finalCRC: finalCRC)
        }
        guard let patched else { throw layoutError("\(name)'s central directory record", path: path) }
        try file.write(Array(patched[16..<20]), at: directoryOffset + 16)
    }

    private static func littleEndianBytes(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }
}

extension [UInt8] {
    fileprivate func uint16(at offset: Int) -> UInt16 {
        UInt16(self[offset]) | UInt16(self[offset + 1]) << 8
    }

    fileprivate func uint32(at offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(self[offset + $1]) << (8 * $1) }
    }

    fileprivate func uint64(at offset: Int) -> UInt64 {
        (0..<8).reduce(0) { $0 | UInt64(self[offset + $1]) << (8 * $1) }
    }
}
