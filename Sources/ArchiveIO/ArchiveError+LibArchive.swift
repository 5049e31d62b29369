internal import CArchive

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension ArchiveError {
    /// Builds an error from the archive's last failure (`archive_error_string`, `archive_errno`).
    ///
    /// libarchive reports misuse ("INTERNAL ERROR: Function ... invoked with archive structure in state ...")
    /// with `ARCHIVE_ERRNO_PROGRAMMER`; that becomes `.usage` whatever `code` says.
    init(libarchive archive: OpaquePointer, code: Code, operation: String) {
        let number = archive_errno(archive)
        let detail =
            archive_error_string(archive).map { String(decoding: cStringBytes($0), as: UTF8.self) }
            ?? "unknown libarchive error"
        var code = code
        if number == EINVAL, detail.hasPrefix("INTERNAL ERROR") {
            code = .usage
        }
        // Only pass on errno values that come from the operating system; ARCHIVE_ERRNO_MISC is -1 and
        // ARCHIVE_ERRNO_FILE_FORMAT is EILSEQ, neither says anything about the system.
        let osErrno: Int32? = (number > 0 && number != EILSEQ) ? number : nil
        self.init(code, "\(operation): \(detail)", errno: osErrno)
    }
}

/// Throws unless `rc` is `ARCHIVE_OK`. `ARCHIVE_WARN` counts as failure: for untrusted input a
/// "warning" (bad CRC, unconvertible name) means the data is not what the archive claims, and for the
/// writer it means the bytes written differ from what was asked.
func check(
    _ rc: Int32, _ archive: OpaquePointer, _ operation: String, as code: ArchiveError.Code
) throws(ArchiveError) {
    if rc != ARCHIVE_OK {
        throw ArchiveError(libarchive: archive, code: code, operation: operation)
    }
}

/// Copies a C string's bytes (no terminator).
func cStringBytes(_ pointer: UnsafePointer<CChar>) -> [UInt8] {
    let length = strlen(pointer)
    return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
        Array(UnsafeBufferPointer(start: $0, count: length))
    }
}
