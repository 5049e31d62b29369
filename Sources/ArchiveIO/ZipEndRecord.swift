#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a zip's end-of-central-directory record says, checked against what libarchive read.
///
/// libarchive silently drops central-directory records that point at a local header already seen, which is how
/// overlapping-entry zips hide files that other extractors do unpack; and it ignores bytes after the end record,
/// where another extractor may find a second archive. Both are refused.
public struct ZipEndRecord: Sendable {
    /// Entries the central directory declares; nil for Zip64 counts.
    public var declaredEntries: Int?
    /// Bytes after the end record and its comment.
    public var trailingBytes: Int

    /// Reads the last end record of the zip at `path`; nil when there is none.
    public static func read(path: String) -> ZipEndRecord? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        let size = Int(info.st_size)
        // The end record is 22 bytes plus a comment of at most 65,535 bytes.
        let length = min(size, 22 + 65_535)
        guard length >= 22 else { return nil }
        var tail = [UInt8](repeating: 0, count: length)
        let read = tail.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, length, off_t(size - length)) }
        guard read == length else { return nil }
        var index = length - 22
        while index >= 0 {
            if tail[index] == 0x50 && tail[index + 1] == 0x4b && tail[index + 2] == 0x05 && tail[index + 3] == 0x06 {
                let total = Int(tail[index + 10]) | Int(tail[index + 11]) << 8
                let comment = Int(tail[index + 20]) | Int(tail[index + 21]) << 8
                return ZipEndRecord(
                    declaredEntries: total == 0xffff ? nil : total, trailingBytes: max(0, length - (index + 22 + comment)))
            }
            index -= 1
        }
        return nil
    }
}
