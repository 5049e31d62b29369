#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The kind of one entry in a package folder or archive.
public enum EntryKind: String, Sendable, Codable {
    case file, directory, symlink, hardlink, device, fifo, socket, unknown

    /// The kind from a `st_mode` value.
    public init(mode: UInt32) {
        switch mode & UInt32(S_IFMT) {
        case UInt32(S_IFREG): self = .file
        case UInt32(S_IFDIR): self = .directory
        case UInt32(S_IFLNK): self = .symlink
        case UInt32(S_IFCHR), UInt32(S_IFBLK): self = .device
        case UInt32(S_IFIFO): self = .fifo
        case UInt32(S_IFSOCK): self = .socket
        default: self = .unknown
        }
    }

    /// Words for messages.
    public var noun: String {
        switch self {
        case .file: "regular file"
        case .directory: "folder"
        case .symlink: "symlink"
        case .hardlink: "hard link"
        case .device: "device"
        case .fifo: "fifo"
        case .socket: "socket"
        case .unknown: "entry of unknown type"
        }
    }
}

/// Permission bits as the system calls take them (`mode_t`: 32 bits on Linux, 16 on macOS).
public typealias FileMode = mode_t
