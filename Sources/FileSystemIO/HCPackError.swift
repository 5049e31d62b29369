#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failure that stops a command: the environment (missing file, permission, disk full) or a refused request.
///
/// Problems *in a package* are not errors: they are `Problem`s in a report.
public struct HCPackError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The input path does not exist.
        case notFound
        /// The operating system refused access.
        case permissionDenied
        /// The disk or a quota is full.
        case diskFull
        /// Any other operating-system failure.
        case io
        /// The package is invalid; the report says why. Nothing was written.
        case invalidPackage
        /// The request itself is wrong (conflicting options, output exists without --force, ...).
        case invalidRequest
        /// Another hcpack holds the destination's lock.
        case locked
    }

    public var code: Code
    public var message: String
    /// The file the failure is about, when there is one.
    public var path: String?

    public init(_ code: Code, _ message: String, path: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
    }

    /// An error for a failed system call, classified by `errno`.
    public static func system(_ operation: String, path: String, errno code: Int32) -> HCPackError {
        let reason = String(cString: strerror(code))
        switch code {
        case ENOENT, ENOTDIR:
            return HCPackError(.notFound, "\(path): \(reason) (\(operation)); check the path", path: path)
        case EACCES, EPERM, EROFS:
            return HCPackError(.permissionDenied, "\(path): \(reason) (\(operation)); check its permissions", path: path)
        case ENOSPC, EDQUOT, EFBIG:
            return HCPackError(.diskFull, "\(path): \(reason) (\(operation)); free some space and run again", path: path)
        default:
            return HCPackError(.io, "\(path): \(reason) (\(operation))", path: path)
        }
    }

    public var description: String { message }
}
