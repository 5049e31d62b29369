import Digest

/// An archive file's size and SHA-256, read once in 1 MiB chunks (bounded memory), with the file's stamp so a
/// caller can tell whether it changed afterwards.
public struct ArchiveFingerprint: Sendable, Equatable {
    /// Size in bytes.
    public var size: Int64
    /// SHA-256, lower-case hex.
    public var sha256: String
    /// The file as it was when read.
    public var stamp: FileStamp

    /// Reads and hashes the archive at `path`.
    public static func of(_ path: String) throws(HCPackError) -> ArchiveFingerprint {
        try of(OpenFile(reading: path))
    }

    /// Reads and hashes the open `file` from its first byte (`pread`: the descriptor's offset is not used).
    static func of(_ file: OpenFile) throws(HCPackError) -> ArchiveFingerprint {
        let path = file.path
        let before = try file.stamp()
        let hasher = Hasher(.sha256)
        var size: Int64 = 0
        try file.readChunks { (chunk: UnsafeRawBufferPointer) throws(HCPackError) in
            hasher.update(chunk)
            size += Int64(chunk.count)
        }
        let after = try file.stamp()
        guard before == after, size == after.size else {
            throw HCPackError(.io, "\(path) changed while it was being read; run again once nothing writes to it", path: path)
        }
        return ArchiveFingerprint(size: size, sha256: hasher.finalize().hexString, stamp: after)
    }

    /// Whether the file at `path` is still the one fingerprinted (same stamp).
    func isCurrent(_ path: String) throws(HCPackError) -> Bool {
        try OpenFile(reading: path).stamp() == stamp
    }
}
