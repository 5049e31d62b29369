import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A temporary folder for one test, removed when the test ends.
public final class TemporaryFolder {
    public let path: String

    public init() {
        var template = Array((NSTemporaryDirectory() + "/hcpack-test-XXXXXX").utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = created.map { String(cString: $0) } ?? NSTemporaryDirectory() + "/hcpack-test-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Absolute path of `relative` inside the folder.
    public func url(_ relative: String) -> String { relative.isEmpty ? path : path + "/" + relative }

    /// Writes a file, creating its parent folders.
    @discardableResult
    public func write(_ relative: String, _ bytes: [UInt8]) -> String {
        let full = url(relative)
        try? FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: full, contents: Data(bytes))
        return full
    }

    @discardableResult
    public func write(_ relative: String, _ text: String) -> String { write(relative, Array(text.utf8)) }

    public func makeFolder(_ relative: String) {
        try? FileManager.default.createDirectory(atPath: url(relative), withIntermediateDirectories: true)
    }

    public func remove(_ relative: String) { try? FileManager.default.removeItem(atPath: url(relative)) }

    public func read(_ relative: String) -> [UInt8]? { FileManager.default.contents(atPath: url(relative)).map { Array($0) } }
}

/// Runs a program and returns its exit status and output.
@discardableResult
public func run(_ executable: String, _ arguments: [String], in directory: String? = nil, input: String? = nil) -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/env")
    process.arguments = executable.hasPrefix("/") ? arguments : [executable] + arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    let inputPipe = Pipe()
    process.standardInput = inputPipe
    do { try process.run() } catch { return (127, "\(error)") }
    if let input { inputPipe.fileHandleForWriting.write(Data(input.utf8)) }
    try? inputPipe.fileHandleForWriting.close()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Runs a Python script (fixtures that need exact archive bytes); `arguments` are `sys.argv[1:]`.
@discardableResult
public func python(_ script: String, arguments: [String] = [], in directory: String) -> (status: Int32, output: String) {
    run("python3", ["-c", script] + arguments, in: directory)
}

/// XML for a ContentInfo.plist with the given keys (values already XML).
public func plistXML(_ body: String) -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    <dict>
    \(body)
    </dict>
    </plist>

    """
}

public func filesXML(_ files: [String]) -> String {
    "<key>Files</key><array>" + files.map { "<string>\(xmlEscape($0))</string>" }.joined() + "</array>"
}

public func xmlEscape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
}

/// The files of the standard test package.
public let sampleFiles: [(String, String)] = [
    ("index.json", "{\"title\": \"Levels\"}\n"),
    ("levels/1.json", "{\"level\": 1}\n"),
    ("levels/2.json", "{\"level\": 2}\n"),
    ("art/Café.txt", "non-ASCII name\n"),
]

/// Writes a valid package into `folder` (at `root`, default the folder itself).
public func writeValidPackage(in folder: TemporaryFolder, root: String = "", files: [(String, String)] = sampleFiles, extraKeys: String = "") {
    let prefix = root.isEmpty ? "" : root + "/"
    for (path, text) in files { folder.write(prefix + "Contents/" + path, text) }
    folder.write(
        prefix + "ContentInfo.plist",
        plistXML(
            """
            <key>IAPProductIdentifier</key><string>com.example.levels</string>
            <key>ContentVersion</key><string>1.0</string>
            \(filesXML(files.map(\.0)))
            \(extraKeys)
            """))
}

/// Zips the contents of `source` (relative to it, folders included) into `archive` with Python's zipfile, which
/// marks non-ASCII names UTF-8 (Debian's Info-ZIP does not, and verify refuses such names: zip.unportable-name).
public func zipFolder(_ source: String, to archive: String) {
    let result = python(
        """
        import os, sys, zipfile
        with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
            for root, dirs, files in os.walk('.'):
                dirs.sort()
                for name in sorted(dirs) + sorted(files):
                    path = os.path.join(root, name)[2:]
                    z.write(path, path + '/' if os.path.isdir(path) else path)
        """, arguments: [archive], in: source)
    #expect(result.status == 0, "zipfile failed: \(result.output)")
}

/// How a zip's central directory describes each entry, as Python's zipfile reads it: a fixture made by another
/// program (Info-ZIP, bsdtar, zipfile) is checked for the shape a test relies on, since versions differ.
public struct ZipEntryShape: Sendable, Equatable {
    /// General-purpose flags: bit 0 encrypted, bit 3 data descriptor, bit 11 UTF-8 name.
    public let flags: Int
    /// 0 stored, 8 deflated.
    public let method: Int

    public var encrypted: Bool { flags & 0x1 != 0 }
    public var dataDescriptor: Bool { flags & 0x8 != 0 }
    public var utf8Name: Bool { flags & 0x800 != 0 }
}

/// The shape of every entry of the zip at `path`, by name as zipfile decodes it; empty when zipfile cannot
/// read the zip (recorded as an issue).
public func zipEntryShapes(_ path: String) -> [String: ZipEntryShape] {
    let listed = run(
        "python3",
        ["-c", "import sys, zipfile\nfor i in zipfile.ZipFile(sys.argv[1]).infolist(): print(i.flag_bits, i.compress_type, i.filename)", path])
    guard listed.status == 0 else {
        Issue.record("zipfile cannot list \(path): \(listed.output)")
        return [:]
    }
    var shapes: [String: ZipEntryShape] = [:]
    for line in listed.output.split(separator: "\n") {
        let fields = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, let flags = Int(fields[0]), let method = Int(fields[1]) else { continue }
        shapes[String(fields[2])] = ZipEntryShape(flags: flags, method: method)
    }
    return shapes
}
