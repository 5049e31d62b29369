import Foundation

/// Where a command writes text.
public protocol TextSink: AnyObject {
    func write(_ text: String)
}

/// Writes to a file descriptor (stdout, stderr).
public final class FileDescriptorSink: TextSink {
    private let handle: FileHandle
    public init(_ handle: FileHandle) { self.handle = handle }
    public func write(_ text: String) { handle.write(Data(text.utf8)) }
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
