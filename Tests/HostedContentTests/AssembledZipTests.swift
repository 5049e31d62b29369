import ArchiveIO
import Digest
import Foundation
@testable import HostedContent
import TestSupport
import Testing

/// Deflating zip builds make their small files' entries on every core and assemble the archive (one
/// `ZipEntryWriter` per entry, the central directory written by hcpack): the bytes must be the single
/// libarchive writer's, whatever the timing.
@Suite("build: zips assembled from entries made on every core")
struct AssembledZipTests {
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    static func json(_ count: Int, seed: Int) -> [UInt8] {
        var text = ""
        var line = 0
        while text.utf8.count < count {
            text += "{\"seed\": \(seed), \"line\": \(line), \"name\": \"opening \(line % 17)\"},\n"
            line += 1
        }
        return Array(text.utf8.prefix(count))
    }

    /// More small files than the workers may make ahead, files at the small-file limit and just past it,
    /// stored and deflated, empty, non-ASCII names, nested folders.
    static func writeSources(in folder: TemporaryFolder) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for index in 0..<(PreparedEntries.aheadCount * 2 + 7) {
            files["data/level-\(index % 5)/chapter-\(index).json"] = json(200 + index * 37, seed: index)
        }
        let limit = Int(PreparedEntries.largestFile)
        files["edge/at-limit.json"] = json(limit, seed: 1)
        files["edge/past-limit.json"] = json(limit + 1, seed: 2)
        files["edge/random-at-limit.bin"] = randomBytes(limit)
        files["edge/random-past-limit.bin"] = randomBytes(limit + 1)
        files["media/big.bin"] = randomBytes(3 << 20)
        files["media/big.json"] = json(2 << 20, seed: 3)
        files["images/small.bin"] = randomBytes(5_000)
        files["empty"] = []
        files["tiny.txt"] = Array("tiny".utf8)
        files["Ouvertures/Défense sicilienne.json"] = json(3_000, seed: 4)
        for (path, bytes) in files { folder.write("src/" + path, bytes) }
        return files
    }

    @Test("An assembled zip is the single writer's bytes, and verifies", arguments: [CompressionPolicy.auto, .deflate])
    func sameBytes(compression: CompressionPolicy) throws {
        let folder = TemporaryFolder()
        let files = Self.writeSources(in: folder)
        func options(_ name: String) -> BuildOptions {
            BuildOptions(
                source: folder.url("src"), output: folder.url(name), productIdentifier: "p", contentVersion: "1",
                compression: compression)
        }
        let plan = try Builder.prepare(options("a.zip"))
        #expect(plan.fitsAssembledZip)
        let assembled = try Builder.write(plan, options: options("a.zip"), progress: nil, assembling: true)
        var whole = plan
        whole.output = folder.url("b.zip")
        let single = try Builder.write(whole, options: options("b.zip"), progress: nil, assembling: false)
        let bytes = try #require(folder.read("a.zip"))
        let sameBytes = bytes == folder.read("b.zip")  // not the arrays themselves: a failure would print them
        #expect(sameBytes)
        #expect(assembled.sha256 == single.sha256)
        // The directory's size reserved up front is the size written (the end record says it).
        let end = bytes.count - 22
        let directorySize = Int(bytes[end + 12]) | Int(bytes[end + 13]) << 8 | Int(bytes[end + 14]) << 16 | Int(bytes[end + 15]) << 24
        #expect(directorySize == plan.centralDirectorySize)
        #expect(assembled.sha256 == Digest.Hasher.digest(.sha256, of: bytes).hexString)
        #expect(try Verifier.verify(folder.url("a.zip")).isValid())
        let built = builtFiles(folder.url("a.zip"), format: .zip, scratch: folder)
        #expect(built.count == files.count + 1)
        for (path, content) in files { #expect(built["Contents/" + path] == content, "\(path)") }
    }

    @Test("Other zip readers take an assembled zip whole: unzip -t, Python's zipfile, bsdtar")
    func otherReaders() throws {
        let folder = TemporaryFolder()
        let files = Self.writeSources(in: folder)
        try Builder.build(
            BuildOptions(source: folder.url("src"), output: folder.url("a.zip"), productIdentifier: "p", contentVersion: "1"))
        let unzip = run("unzip", ["-t", folder.url("a.zip")])
        #expect(unzip.status == 0 && unzip.output.contains("No errors detected"), "\(unzip.output)")
        let listed = python(
            """
            import sys, zipfile
            z = zipfile.ZipFile(sys.argv[1])
            assert z.testzip() is None
            print(len([i for i in z.infolist() if not i.is_dir()]))
            """, arguments: [folder.url("a.zip")], in: folder.path)
        #expect(listed.status == 0 && listed.output.trimmingCharacters(in: .whitespacesAndNewlines) == "\(files.count + 1)", "\(listed.output)")
        folder.makeFolder("x")
        let bsdtar = run("bsdtar", ["-xf", folder.url("a.zip"), "-C", folder.url("x")])
        #expect(bsdtar.status == 0, "\(bsdtar.output)")
        for (path, content) in files { #expect(folder.read("x/Contents/" + path) == content, "\(path)") }
    }

    @Test("A small file changed after the plan fails the build by name, and nothing is written")
    func changedSmallFile() throws {
        let folder = TemporaryFolder()
        _ = Self.writeSources(in: folder)
        folder.makeFolder("out")
        let options = BuildOptions(
            source: folder.url("src"), output: folder.url("out/a.zip"), productIdentifier: "p", contentVersion: "1")
        let plan = try Builder.prepare(options)
        folder.write("src/data/level-3/chapter-98.json", Self.json(200 + 98 * 37, seed: 999))  // same size
        let error = #expect(throws: HCPackError.self) { try Builder.write(plan, options: options) }
        #expect(error?.message.contains("chapter-98.json changed") == true, "\(String(describing: error))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url("out")).isEmpty)
    }

    @Test("Zips that may need zip64 are written whole")
    func largeZipsWrittenWhole() throws {
        #expect(ZipCentralDirectory.fits(entryCount: 10, bytes: 1 << 30))
        #expect(!ZipCentralDirectory.fits(entryCount: 70_000, bytes: 1 << 20))
        #expect(!ZipCentralDirectory.fits(entryCount: 10, bytes: 1 << 32))
        let folder = TemporaryFolder()
        _ = Self.writeSources(in: folder)
        let plan = try Builder.prepare(
            BuildOptions(source: folder.url("src"), output: folder.url("a.zip"), productIdentifier: "p", contentVersion: "1"))
        #expect(plan.fitsAssembledZip)
        var many = plan
        let folderItem = try #require(plan.items.first { $0.kind == .directory })
        many.items += Array(repeating: folderItem, count: 70_000)
        #expect(!many.fitsAssembledZip)
        var large = plan
        let fileIndex = try #require(plan.items.firstIndex { $0.kind == .file })
        large.items[fileIndex].size = 5 << 30
        #expect(!large.fitsAssembledZip)
    }
}
