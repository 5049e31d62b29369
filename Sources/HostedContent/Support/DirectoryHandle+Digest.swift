import Digest

extension DirectoryHandle {
    /// The size and SHA-256 of a regular file, read without following symlinks; nil when it does not exist.
    public func digest(_ name: String) throws(HCPackError) -> FileRecord? {
        guard let file = try openForReading(name) else { return nil }
        defer { Descriptor.release(file) }
        return try PositionedFile(descriptor: file, path: describe(name)).digest()
    }
}

extension PositionedFile {
    /// The size and SHA-256 of the whole file, read with `pread` from its start (the descriptor's offset is
    /// left alone, so another reader may share it).
    public func digest() throws(HCPackError) -> FileRecord {
        let hasher = Digest.Hasher(.sha256)
        var total: Int64 = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = try readAvailable(into: buffer, at: total)
            if count == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            total += Int64(count)
        }
        return FileRecord(size: total, sha256: hasher.finalize().hexString)
    }
}
