import Digest

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Rewrites a zip's first entry, whose data libarchive wrote as reserved: a build that hashes its sources
/// while writing them reserves ContentInfo.plist (first, stored, digests zeroed), and once the digests are
/// known writes the real one over it. Same length, so only the data and its CRC-32 change: in the data
/// descriptor (or the local header) and in the central directory record.
///
/// Every field is checked against what was reserved before a byte is written; a layout that does not match
/// (another libarchive, a bug) fails the build rather than leave an archive whose plist does not match its CRC.
enum ZipEntryRewrite {
    private static let localHeaderSignature: UInt32 = 0x0403_4b50
    private static let descriptorSignature: UInt32 = 0x0807_4b50
    private static let centralHeaderSignature: UInt32 = 0x0201_4b50
    private static let endSignature: UInt32 = 0x0605_4b50
    private static let zip64LocatorSignature: UInt32 = 0x0706_4b50
    private static let zip64EndSignature: UInt32 = 0x0606_4b50

    static func layoutError(_ what: String, path: String) -> HCPackError {
        HCPackError(.io, "\(path): \(what) is not where the build left it; nothing was written, report this as a bug", path: path)
    }

    /// Replaces the first entry's data (`final.reserved`, stored) with `final`'s bytes, and its CRC-32 in the
    /// data descriptor or local header. The central directory is `patchedCentralRecord`'s or
    /// `replaceCentralCRC`'s job.
    /// - Parameters:
    ///   - descriptor: the archive, open for reading and writing, written at least past the first entry.
    ///   - path: how messages name it.
    ///   - name: the first entry's name, checked in its header.
    ///   - finalCRC: `final.checksum()`, computed once by the caller.
    /// - Throws: `HCPackError` `.io` when the archive is not laid out as reserved, or a read or write fails.
    static func replaceFirstEntryData(
        in descriptor: Int32, path: String, name: String, with final: FilledReservation, finalCRC: UInt32
    ) throws(HCPackError) {
        let file = PositionedFile(descriptor: descriptor, path: path)
        let reserved = final.reserved

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
        for window in stride(from: 0, to: reserved.count, by: FilledReservation.windowSize) {
            let range = window..<min(window + FilledReservation.windowSize, reserved.count)
            try file.write(final.bytes(range), at: dataStart + Int64(window))
        }
        try file.write(littleEndianBytes(finalCRC), at: crcOffset)
    }

    /// `bytes` with the CRC-32 replaced when they start with the central directory record of the first entry,
    /// `name`, holding `reservedCRC`; nil for anything else. For the central directory as libarchive hands it
    /// over, before it is written: the stream can then be hashed as written.
    static func patchedCentralRecord(
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
    static func replaceCentralCRC(
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

/// A reserved file's final bytes: the reservation with 64 lowercase hex digits at each slot, from 32-byte
/// digests, made a window at a time so the final copy never exists whole (7.5 MB for a plist of 26,000
/// records, which pushed a 2 GiB build's peak RSS from 55 to 62 MiB).
struct FilledReservation: Sendable {
    /// The bytes as written first.
    let reserved: [UInt8]
    /// Where each slot's 64 digits start in `reserved`, ascending.
    let slots: [Int]
    /// 32 bytes a slot, in slot order.
    let digests: [UInt8]

    static let windowSize = 1 << 20

    /// The final bytes in `range`.
    func bytes(_ range: Range<Int>) -> [UInt8] {
        var window = Array(reserved[range])
        // The first slot whose digits reach into the range.
        var low = 0
        var high = slots.count
        while low < high {
            let middle = (low + high) / 2
            if slots[middle] + 64 <= range.lowerBound { low = middle + 1 } else { high = middle }
        }
        var slot = low
        while slot < slots.count && slots[slot] < range.upperBound {
            let digits = Array(digests[(32 * slot)..<(32 * slot + 32)].hexString.utf8)
            let overlap = max(slots[slot], range.lowerBound)..<min(slots[slot] + 64, range.upperBound)
            window.replaceSubrange(
                (overlap.lowerBound - range.lowerBound)..<(overlap.upperBound - range.lowerBound),
                with: digits[(overlap.lowerBound - slots[slot])..<(overlap.upperBound - slots[slot])])
            slot += 1
        }
        return window
    }

    /// CRC-32 of the final bytes.
    func checksum() -> UInt32 {
        stride(from: 0, to: reserved.count, by: Self.windowSize).reduce(0) { crc, start in
            CRC32.update(crc, with: bytes(start..<min(start + Self.windowSize, reserved.count)))
        }
    }
}

/// `pread`/`pwrite` of whole ranges, with errors that name the file.
struct PositionedFile {
    let descriptor: Int32
    let path: String

    func size() throws(HCPackError) -> Int64 {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw HCPackError.system("fstat", path: path, errno: errno) }
        return Int64(info.st_size)
    }

    /// Exactly `count` bytes at `offset`; fewer (the file ends) is an error.
    func read(_ count: Int, at offset: Int64) throws(HCPackError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var failure: HCPackError?
        bytes.withUnsafeMutableBytes { buffer in
            do throws(HCPackError) { try fill(buffer, at: offset) } catch { failure = error }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Fills all of `buffer` from `offset`; a file that ends first is an error.
    func fill(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(HCPackError) {
        guard let base = buffer.baseAddress else { return }
        var done = 0
        while done < buffer.count {
            let result = pread(descriptor, base + done, buffer.count - done, off_t(offset) + off_t(done))
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else {
                throw result < 0
                    ? HCPackError.system("read", path: path, errno: errno)
                    : HCPackError(
                        .io, "\(path) ends before byte \(offset + Int64(buffer.count)); it was cut short while being written",
                        path: path)
            }
            done += result
        }
    }

    /// Whether the file holds `expected` at `offset`, compared a MiB at a time.
    func matches(_ expected: [UInt8], at offset: Int64) throws(HCPackError) -> Bool {
        let chunk = 1 << 20
        var start = 0
        while start < expected.count {
            let count = min(chunk, expected.count - start)
            guard try read(count, at: offset + Int64(start))[...] == expected[start..<(start + count)] else { return false }
            start += count
        }
        return true
    }

    func write(_ bytes: [UInt8], at offset: Int64) throws(HCPackError) {
        var done = 0
        while done < bytes.count {
            let result = bytes.withUnsafeBytes {
                pwrite(descriptor, $0.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else { throw HCPackError.system("write", path: path, errno: result < 0 ? errno : EIO) }
            done += result
        }
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

extension Digest.Hasher {
    /// Adds the bytes `range` of `file`, read a buffer at a time.
    func update(contentsOf file: PositionedFile, range: Range<Int64>, buffer: UnsafeMutableRawBufferPointer) throws(HCPackError) {
        var offset = range.lowerBound
        while offset < range.upperBound {
            let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(min(Int64(buffer.count), range.upperBound - offset))])
            try file.fill(chunk, at: offset)
            update(UnsafeRawBufferPointer(chunk))
            offset += Int64(chunk.count)
        }
    }
}
