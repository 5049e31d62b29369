import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Build refuses what verify and install would refuse under the same limits, and writes names they find.
@Suite("build agrees with verify and install: limits, NFD names, --max-size")
struct BuildLimitTests {
    /// A package whose one file is `size` zero bytes (a sparse file: no time spent writing it).
    static func zeros(_ folder: TemporaryFolder, size: Int64) {
        writeValidPackage(in: folder, root: "pkg", files: [("index.json", "{}\n")])
        folder.remove("pkg/ContentInfo.plist")
        folder.write("pkg/ContentInfo.plist", plistXML(identityKeys))
        let path = folder.url("pkg/Contents/zeros.bin")
        FileManager.default.createFile(atPath: path, contents: nil)
        #expect(truncate(path, off_t(size)) == 0)
    }

    @Test("32 MiB of zeros: build refuses it (archive.compression-ratio, nothing written) as verify would; with --max-ratio all three allow it", arguments: ["zip", "tar.gz"])
    func compressionRatio(format: String) throws {
        let folder = TemporaryFolder()
        Self.zeros(folder, size: 32 << 20)
        folder.makeFolder("out")
        let output = "out/p." + format
        let refused = hcpack(["build", "pkg", "-o", output], in: folder.path)
        #expect(refused.status == 1, "\(refused.stdout)\(refused.stderr)")
        #expect(refused.stderr.contains("[archive.compression-ratio]"), "\(refused.stderr)")
        #expect(listing(folder.url("out")).isEmpty)
        let json = hcpack(["build", "pkg", "-o", output, "--json"], in: folder.path)
        #expect(json.status == 1 && jsonObject(json.stdout)?["error"] != nil, "\(json.stdout)")

        let built = hcpack(["build", "pkg", "-o", output, "--max-ratio", "5000"], in: folder.path)
        #expect(built.status == 0, "\(built.stderr)")
        let verified = hcpack(["verify", output], in: folder.path)
        #expect(verified.status == 1 && verified.stdout.contains("archive.compression-ratio"), "\(verified.stdout)")
        #expect(hcpack(["verify", output, "--max-ratio", "5000"], in: folder.path).status == 0)
        folder.makeFolder("dest")
        let installed = hcpack(["install", output, "--dest", "dest", "--max-ratio", "5000"], in: folder.path)
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
    }

    @Test("--max-entries and --max-bytes: build refuses past them as install does, and install reports only archive.limit-exceeded")
    func entriesAndBytes() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        folder.makeFolder("out")
        let entries = hcpack(["build", "pkg", "-o", "out/p.zip", "--max-entries", "5"], in: folder.path)
        #expect(entries.status == 1 && entries.stderr.contains("[archive.limit-exceeded]"), "\(entries.stderr)")
        let bytes = hcpack(["build", "pkg", "-o", "out/p.zip", "--max-bytes", "20"], in: folder.path)
        #expect(bytes.status == 1 && bytes.stderr.contains("[archive.limit-exceeded]"), "\(bytes.stderr)")
        #expect(listing(folder.url("out")).isEmpty)
        #expect(hcpack(["build", "pkg", "-o", "out/p.zip"], in: folder.path).status == 0)
        folder.makeFolder("dest")
        let installed = hcpack(["install", "out/p.zip", "--dest", "dest", "--max-entries", "5", "--json"], in: folder.path)
        #expect(installed.status == 1)
        let problems = try #require(jsonObject(installed.stdout)?["problems"] as? [[String: Any]])
        let rules = Set(problems.compactMap { $0["rule"] as? String })
        #expect(rules == ["archive.limit-exceeded"], "\(problems)")
    }

    @Test(
        "A folder with NFD names builds (zip, tar.gz, dir; Files given in NFD or generated) into a package that verifies and installs, NFC throughout",
        arguments: ["zip", "tar.gz", "dir"], [true, false])
    func decomposedNames(format: String, listed: Bool) throws {
        let folder = TemporaryFolder()
        let decomposed = "Cafe\u{301}/Re\u{301}sume\u{301}.txt"
        let composed = "Caf\u{e9}/R\u{e9}sum\u{e9}.txt"
        #expect(!decomposed.utf8.elementsEqual(composed.utf8))
        writeValidPackage(in: folder, root: "pkg", files: [("index.json", "{}\n"), (decomposed, "accents\n")])
        if !listed {  // else an explicit Files list in NFD, as a macOS tool would write it
            folder.write("pkg/ContentInfo.plist", plistXML(identityKeys))
        }
        let output = folder.url(format == "dir" ? "out" : "p." + format)
        let built = hcpack(["build", folder.url("pkg"), "-o", output, "--format", format])
        #expect(built.status == 0, "\(built.stdout)\(built.stderr)")
        let verified = hcpack(["verify", output])
        #expect(verified.status == 0, "\(verified.stdout)")
        let inspected = try #require(jsonObject(hcpack(["inspect", output, "--json"]).stdout))
        let paths = (inspected["files"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        #expect(paths.contains { $0.utf8.elementsEqual(composed.utf8) }, "\(paths.map { Array($0.utf8) })")
        #expect(!paths.contains { $0.utf8.elementsEqual(decomposed.utf8) })
        let plist = try #require(format == "dir" ? folder.read("out/ContentInfo.plist") : plistBytes(of: output))
        #expect(plist.count > 0 && !containsBytes(plist, Array(decomposed.utf8)) && containsBytes(plist, Array(composed.utf8)))
        guard format != "dir" else { return }
        folder.makeFolder("dest")
        let installed = hcpack(["install", output, "--dest", folder.url("dest")])
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url("dest/Caf\u{e9}")).map { Array($0.utf8) }
            == [Array("R\u{e9}sum\u{e9}.txt".utf8)])
    }

    /// ContentInfo.plist's bytes in a built archive, read with bsdtar.
    func plistBytes(of archive: String) -> [UInt8]? {
        let result = run("bsdtar", ["-xOf", archive, "ContentInfo.plist"])
        return result.status == 0 ? Array(result.output.utf8) : nil
    }

    func containsBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    @Test("--max-size counts the content under Contents/ (the summary's content bytes), not ContentInfo.plist")
    func maxSizeIsContent() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let content = sampleFiles.reduce(0) { $0 + $1.1.utf8.count }
        let exact = hcpack(["build", folder.url("pkg"), "-o", folder.url("p.zip"), "--max-size", String(content)])
        #expect(exact.status == 0, "\(exact.stdout)\(exact.stderr)")
        #expect(exact.stdout.contains("\(content) content bytes"), "\(exact.stdout)")
        #expect(hcpack(["verify", folder.url("p.zip"), "--max-size", String(content)]).status == 0)
        let over = hcpack(["verify", folder.url("p.zip"), "--max-size", String(content - 1)])
        #expect(over.status == 1 && over.stdout.contains("content.too-large"), "\(over.stdout)")
    }
}
