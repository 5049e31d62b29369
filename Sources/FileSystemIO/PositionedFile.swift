#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `pread`/`pwrite` of whole ranges, with errors that name the file.
public struct PositionedFile: Sendable {
    /// The open file; not owned (the caller closes it).
    public let descriptor: Int32
    /// The file's path, for messages.
    public let path: String

    /// Wraps an open descriptor.
    public init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    /// The file's size (`fstat`).
    public func size() throws(HCPackError) -> Int64 {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw HCPackError.system("fstat", path: path, errno: errno) }
        return Int64(info.st_size)
    }

    /// Exactly `count` bytes at `offset`; fewer (the file ends) is an error.
    public func read(_ count: Int, at offset: Int64) throws(HCPackError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var failure: HCPackError?
        bytes.withUnsafeMutableBytes { buffer in
            do throws(HCPackError) { try fill(buffer, at: offset) } catch { failure = error }
        }
        if let failure { throw failure }
        return bytes
    }

    /// At most `count` bytes at `offset`: fewer where the file ends.
    public func readAvailable(_ count: Int, at offset: Int64) throws(HCPackError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var result: Result<Int, HCPackError> = .success(0)
        bytes.withUnsafeMutableBytes { buffer in
            result = Result { () throws(HCPackError) in try readAvailable(into: buffer, at: offset) }
        }
        bytes.removeSubrange(try result.get()...)
        return bytes
    }

    /// Reads into `buffer` from `offset` until it is full or the file ends: the count read.
    public func readAvailable(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(HCPackError) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let result = pread(descriptor, base + done, buffer.count - done, off_t(offset) + off_t(done))
            if result < 0 && errno == EINTR { continue }
            if result < 0 { throw HCPackError.system("read", path: path, errno: errno) }
            if result == 0 { break }
            done += result
        }
        return done
    }

    /// Fills all of `buffer` from `offset`; a file that ends first is an error.
    public func fill(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(HCPackError) {
        guard try readAvailable(into: buffer, at: offset) == buffer.count else {
            throw HCPackError(
                .io, "\(path) ends before byte \(offset + Int64(buffer.count)); it was cut short while being written",
                path: path)
        }
    }

    /// Whether the file holds `expected` at `offset`, compared a MiB at a time.
    public func matches(_ expected: [UInt8], at offset: Int64) throws(HCPackError) -> Bool {
        let chunk = 1 << 20
        var start = 0
        while start < expected.count {
            let count = min(chunk, expected.count - start)
            guard try read(count, at: offset + Int64(start))[...] == expected[start..<(start + count)] else { return false }
            start += count
        }
        return true
    }

    /// Writes all of `bytes` at `offset` (`pwrite`).
    public func write(_ bytes: [UInt8], at offset: Int64) throws(HCPackError) {
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
