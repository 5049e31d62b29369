/// A failure reading or writing an archive, with libarchive's own message.
public struct ArchiveError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, stable for callers to switch on.
    public enum Code: String, Sendable {
        /// The input is not an archive in a format we read (or is an unsupported one such as RAR, 7z, ISO).
        case unsupportedFormat
        /// A compressed stream whose content is compressed again (`.tar.gz.gz`): hosted content is compressed
        /// once, and a second layer only multiplies a bomb's ratio (and met libarchive bugs).
        case nestedCompression
        /// The archive is damaged: bad checksum, truncated, inconsistent headers.
        case corrupt
        /// An encrypted entry, which we never decrypt.
        case encrypted
        /// A limit in `ArchiveLimits` was exceeded.
        case limitExceeded
        /// The operating system failed (open, read, write, disk full); `errno` says why.
        case io
        /// A read made no progress within `ArchiveLimits.stallSeconds` (`ArchiveWatchdog`); never thrown: the
        /// process ends with it.
        case stalled
        /// API misuse (for example, writing data before a header).
        case usage
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, with libarchive's own words where it gave any (`archive_error_string`).
    public var message: String
    /// The `errno` value behind an `.io` failure, when known.
    public var errno: Int32?

    /// Builds an error; `errno` only for `.io` failures with a known cause.
    public init(_ code: Code, _ message: String, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    /// The message.
    public var description: String { message }
}
