import Foundation
import HostedContent
import TestSupport
import Testing

/// `write` reads sources on a thread of its own into 1 MiB buffers, packing files one after another and
/// lending stored bytes to the archive's writer: these tests put files across and around those buffers.
@Suite("build: reading sources ahead of the writer")
struct BuildSourceReaderTests {
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Files that span buffers, end near a buffer's end, or are empty, in archive order (`a` to `f`).
    /// `b.mixed` starts 40 KiB before the end of the first buffer: random there, zeros after, so its first
    /// 40 KiB alone look incompressible while its first 64 KiB (what auto looks at) do not.
    static func sources() -> [(String, [UInt8])] {
        [
            ("a.bin", randomBytes((1 << 20) - (40 << 10))),
            ("b.mixed", randomBytes(40 << 10) + [UInt8](repeating: 0, count: 100 << 10)),
            ("c-empty.txt", []),
            ("d-tiny.txt", Array("tiny".utf8)),
            ("e.json", Array(String(repeating: "{\"level\": 1, \"name\": \"opening\"},\n", count: 100_000).utf8)),
            ("f.bin", randomBytes((5 << 20) + 3)),
        ]
    }

    @Test("Files across and around the read buffers arrive whole", arguments: buildFormats)
    func wholeFiles(format: BuildFormat) throws {
        let folder = TemporaryFolder()
        let files = Self.sources()
        for (name, bytes) in files { folder.write("src/" + name, bytes) }
        for compression in CompressionPolicy.allCases where format == .zip || compression == .auto {
            let output = folder.url("\(compression.rawValue)-" + outputName(format))
            let result = try Builder.build(
                BuildOptions(
                    source: folder.url("src"), output: output, format: format, productIdentifier: "p", contentVersion: "1",
                    compression: compression))
            #expect(result.fileCount == files.count)
            let built = builtFiles(output, format: format, scratch: folder)
            for (name, bytes) in files {
                #expect(built["Contents/" + name] == bytes, "\(name), \(format), \(compression)")
            }
        }
    }

    @Test("Auto compression sees a file's first 64 KiB whole, wherever it starts in a buffer")
    func compressionFromWholeHead() throws {
        let folder = TemporaryFolder()
        let files = Self.sources()
        for (name, bytes) in files { folder.write("src/" + name, bytes) }
        let mixed = try #require(files.first { $0.0 == "b.mixed" }?.1)
        #expect(CompressionPolicy.auto.choose(head: mixed) == .deflate)
        #expect(CompressionPolicy.auto.choose(head: Array(mixed.prefix(40 << 10))) == .store, "a cut head would be stored")
        try Builder.build(
            BuildOptions(source: folder.url("src"), output: folder.url("out.zip"), productIdentifier: "p", contentVersion: "1"))
        let lines = zipCompressionMethods(folder.url("out.zip"))
        #expect(
            lines.isSuperset(of: [
                "Contents/a.bin 0", "Contents/b.mixed 8", "Contents/c-empty.txt 0", "Contents/d-tiny.txt 0",
                "Contents/e.json 8", "Contents/f.bin 0",
            ]), "\(lines)")
    }

    @Test("A file that grows or shrinks after validation fails the build and leaves nothing behind", arguments: buildFormats)
    func grownOrShrunk(format: BuildFormat) throws {
        let folder = TemporaryFolder()
        folder.makeFolder("out")
        let original = Self.randomBytes((3 << 20) + 5)
        for changed in [original + [1], Array(original.dropLast(1 << 20))] {
            folder.write("src/big.bin", original)
            folder.write("src/small.txt", "small")
            let options = BuildOptions(
                source: folder.url("src"), output: folder.url("out/" + outputName(format)), format: format,
                productIdentifier: "p", contentVersion: "1")
            let plan = try Builder.prepare(options)
            #expect(plan.isValid)
            folder.write("src/big.bin", changed)
            let error = #expect(throws: HCPackError.self) { try Builder.write(plan, options: options) }
            #expect(error?.message.contains("big.bin changed") == true, "\(String(describing: error))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url("out")).isEmpty, "\(format)")
        }
    }
}
