import ArchiveIO
import Foundation
import Testing

/// A temporary directory for one test, removed by `remove()` (call it in a `defer`).
struct TempDir {
    let url: URL

    init() throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("archiveio-XXXXXX")
        var template = Array(base.path.utf8CString)
        guard let made = mkdtemp(&template) else {
            throw ArchiveError(.io, "mkdtemp failed", errno: errno)
        }
        url = URL(fileURLWithPath: String(cString: made), isDirectory: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func write(_ name: String, _ bytes: [UInt8]) throws {
        let target = url.appendingPathComponent(name)
        try FileManager.default.createDirectory(
            at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(bytes).write(to: target)
    }

    func read(_ name: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: url.appendingPathComponent(name))) }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

struct ToolFailure: Error, CustomStringConvertible {
    var description: String
}

/// Runs a tool from PATH and returns its standard output; throws when it exits non-zero.
@discardableResult
func run(_ tool: String, _ arguments: [String], in directory: URL? = nil, allowFailure: Bool = false) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [tool] + arguments
    if let directory { process.currentDirectoryURL = directory }
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let out = output.fileHandleForReading.readDataToEndOfFile()
    let err = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    if process.terminationStatus != 0, !allowFailure {
        throw ToolFailure(
            description: "\(tool) \(arguments) exited \(process.terminationStatus): "
                + String(decoding: err, as: UTF8.self))
    }
    return String(decoding: out, as: UTF8.self)
}

/// Runs a Python 3 script with `sys.argv[1:] = arguments`.
@discardableResult
func python(_ script: String, _ arguments: [String] = [], in directory: URL? = nil) throws -> String {
    try run("python3", ["-c", script] + arguments, in: directory)
}

/// Every entry of an archive with its data (small test archives only).
func readAll(_ reader: ArchiveReader) throws -> [(entry: ArchiveEntry, data: [UInt8])] {
    var result: [(entry: ArchiveEntry, data: [UInt8])] = []
    while let entry = try reader.next() {
        var data: [UInt8] = []
        let count = try reader.readData { data.append(contentsOf: $0) }
        #expect(count == Int64(data.count))
        result.append((entry, data))
    }
    return result
}

/// Runs `body` and returns the `ArchiveError` it throws (nil when it throws none or another error).
func archiveError(_ body: () throws -> Void) -> ArchiveError? {
    do {
        try body()
        return nil
    } catch let error as ArchiveError {
        return error
    } catch {
        return nil
    }
}

/// Reads every entry and all data, for tests that expect a failure somewhere along the way.
func drain(_ reader: ArchiveReader) throws {
    while try reader.next() != nil {
        _ = try reader.readData { _ in }
    }
}

/// Writes `entries` with `ArchiveWriter` to `path`; data for files comes from `contents`.
func writeArchive(
    to path: String, format: ArchiveWriteFormat, entries: [ArchiveWriteEntry], contents: [String: [UInt8]]
) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw ArchiveError(.io, "open \(path)", errno: errno) }
    defer { close(fd) }
    let writer = try ArchiveWriter(fileDescriptor: fd, format: format)
    for entry in entries {
        try writer.begin(entry)
        if let data = contents[entry.path] {
            // Several calls, to exercise a file written in pieces.
            var offset = 0
            while offset < data.count {
                let end = min(offset + 7, data.count)
                try data[offset..<end].withUnsafeBytes { try writer.write($0) }
                offset = end
            }
        }
    }
    try writer.finish()
}
