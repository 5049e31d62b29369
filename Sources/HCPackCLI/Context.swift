import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where a command writes text.
public protocol TextSink: AnyObject {
    func write(_ text: String)
}

/// Writes to a file descriptor (stdout, stderr).
///
/// With `write(2)`, not `FileHandle.write`, which traps on an error: output that cannot be written (a full
/// disk or an I/O error on a redirected stdout) is dropped, and never interrupts the work it reports on.
public final class FileDescriptorSink: TextSink {
    private let descriptor: Int32
    /// True once a write failed; later output is dropped.
    public private(set) var failed = false
    public init(_ handle: FileHandle) { descriptor = handle.fileDescriptor }
    public func write(_ text: String) {
        guard !failed else { return }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let count = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                failed = true
                return
            }
            bytes = bytes.dropFirst(count)
        }
    }
}

/// Collects text in memory (tests).
public final class BufferSink: TextSink {
    public private(set) var text = ""
    public init() {}
    public func write(_ text: String) { self.text += text }
}

/// Everything a command may touch besides the file system: output streams, environment, working folder.
/// Commands never `print`, so tests run them in-process.
public struct Context {
    public var standardOutput: TextSink
    public var standardError: TextSink
    public var environment: [String: String]
    public var currentDirectory: String
    /// True when stderr is a terminal (progress bars are drawn only then).
    public var standardErrorIsTerminal: Bool

    public init(
        standardOutput: TextSink, standardError: TextSink, environment: [String: String], currentDirectory: String,
        standardErrorIsTerminal: Bool = false
    ) {
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.environment = environment
        self.currentDirectory = currentDirectory
        self.standardErrorIsTerminal = standardErrorIsTerminal
    }

    /// The real process: stdout, stderr, environment and working folder.
    public static func process() -> Context {
        Context(
            standardOutput: FileDescriptorSink(.standardOutput), standardError: FileDescriptorSink(.standardError),
            environment: ProcessInfo.processInfo.environment,
            currentDirectory: FileManager.default.currentDirectoryPath, standardErrorIsTerminal: isatty(2) == 1)
    }

    /// An absolute path for a path given on the command line.
    public func absolutePath(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        if path == "." { return currentDirectory }
        return currentDirectory + "/" + path
    }

    public func out(_ text: String) { standardOutput.write(text) }
    public func err(_ text: String) { standardError.write(text) }
}
