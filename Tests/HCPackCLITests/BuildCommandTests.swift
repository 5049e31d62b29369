import ArchiveIO
import Foundation
import HostedContent
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Names in a folder, sorted (to prove nothing, not even a temporary file, was left behind).
func listing(_ path: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
}

let identityKeys =
    "<key>IAPProductIdentifier</key><string>com.example.levels</string><key>ContentVersion</key><string>1.0</string>"

/// A source that must not build, and the rule ID the output must name.
struct BadSource: CustomStringConvertible, Sendable {
    let name: String
    let rule: String
    let make: @Sendable (TemporaryFolder) -> Void
    var description: String { name }
}

let badSources: [BadSource] = [
    BadSource(name: "plist without ContentVersion", rule: "plist.missing-key") { folder in
        writeValidPackage(in: folder, root: "src")
        folder.write("src/ContentInfo.plist", plistXML("<key>IAPProductIdentifier</key><string>com.example.levels</string>"))
    },
    BadSource(name: "a listed file is missing", rule: "files.not-found") { folder in
        writeValidPackage(in: folder, root: "src")
        folder.remove("src/Contents/levels/2.json")
    },
    BadSource(name: "a symlink escaping the package", rule: "content.symlink-escapes") { folder in
        writeValidPackage(in: folder, root: "src")
        symlink("/etc/passwd", folder.url("src/Contents/passwd"))
    },
    BadSource(name: "an ELF executable", rule: "content.executable") { folder in
        writeValidPackage(in: folder, root: "src")
        folder.write("src/Contents/tool", [0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0, count: 56))
    },
]

@Suite("hcpack build (command line)")
struct BuildCommandTests {
    @Test("A plain folder builds to <product-id>-<version>.zip in the current folder, and verifies")
    func plainFolderDefaultOutput() throws {
        let folder = TemporaryFolder()
        for (path, text) in sampleFiles { folder.write("content/" + path, text) }
        let result = hcpack(["build", "content", "--product-id", "com.example.cli", "--content-version", "1.2"], in: folder.path)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let output = folder.url("com.example.cli-1.2.zip")
        #expect(result.stdout.contains("built \(output) (zip): 4 files"))
        let digest = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("sha256 ") })
        #expect(digest.count == "sha256 ".count + 64)
        #expect(hcpack(["verify", "--strict", output]).status == 0)
        #expect(result.stderr.isEmpty, "no progress bar when stderr is not a terminal")
    }

    @Test(
        "A plain folder without identity is a usage error", arguments: [["--product-id", "p"], ["--content-version", "1"], []])
    func plainFolderNeedsIdentity(_ options: [String]) {
        let folder = TemporaryFolder()
        folder.write("content/a.json", "{}")
        let result = hcpack(["build", "content", "-o", "out.zip"] + options, in: folder.path)
        #expect(result.status == 2)
        #expect(result.stderr.contains("--product-id") || result.stderr.contains("--content-version"))
        #expect(listing(folder.path) == ["content"])
    }

    @Test("Bad sources exit 1, name the rule and write nothing", arguments: badSources)
    func badSource(_ source: BadSource) {
        let folder = TemporaryFolder()
        source.make(folder)
        folder.makeFolder("out")
        for format in ["zip", "tar.gz", "dir"] {
            let result = hcpack(["build", "src", "-o", "out/package", "--format", format], in: folder.path)
            #expect(result.status == 1, "\(format): \(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("error: [\(source.rule)]"), "\(result.stdout)")
            #expect(result.stderr.contains("nothing was written"))
            #expect(listing(folder.url("out")).isEmpty, "\(format)")
        }
    }

    @Test("--max-size: below the content size, build, install and verify refuse it (exit 1, nothing written); 0 is a usage error")
    func maxSize() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        folder.makeFolder("out")
        folder.makeFolder("dest")
        let small = hcpack(["build", "pkg", "-o", "out/p.zip", "--max-size", "10"], in: folder.path)
        #expect(small.status == 1, "\(small.stdout)\(small.stderr)")
        #expect(small.stdout.contains("error: [content.too-large]"), "\(small.stdout)")
        #expect(listing(folder.url("out")).isEmpty)
        #expect(hcpack(["build", "pkg", "-o", "out/p.zip", "--max-size", "0"], in: folder.path).status == 2)
        let built = hcpack(["build", "pkg", "-o", "out/p.zip", "--max-size", "100000"], in: folder.path)
        #expect(built.status == 0, "\(built.stderr)")
        let refused = hcpack(["install", "out/p.zip", "--dest", "dest", "--max-size", "10"], in: folder.path)
        #expect(refused.status == 1, "\(refused.stdout)\(refused.stderr)")
        #expect(refused.stdout.contains("content.too-large"), "\(refused.stdout)")
        #expect(listing(folder.url("dest")).isEmpty)
        #expect(hcpack(["verify", "out/p.zip", "--max-size", "10"], in: folder.path).status == 1)
        #expect(hcpack(["install", "out/p.zip", "--dest", "dest", "--max-size", "100000"], in: folder.path).status == 0)
    }

    @Test("An existing output exits 2 and stays unchanged; --force replaces it")
    func existingOutput() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        folder.write("out.zip", "precious")
        let refused = hcpack(["build", "pkg", "-o", "out.zip"], in: folder.path)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("already exists; use --force"))
        #expect(folder.read("out.zip") == Array("precious".utf8))
        let forced = hcpack(["build", "pkg", "-o", "out.zip", "--force"], in: folder.path)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(hcpack(["verify", folder.url("out.zip")]).status == 0)
        #expect(listing(folder.path) == ["out.zip", "pkg"])
    }

    @Test("Junk is left out with a note; --exclude leaves out more")
    func junkNotes() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        folder.write("pkg/ContentInfo.plist", plistXML(identityKeys))
        folder.write("pkg/Contents/.DS_Store", "junk")
        folder.write("pkg/Contents/__MACOSX/._index.json", "junk")
        folder.write("pkg/Contents/levels/old.bak", "old")
        let result = hcpack(["build", "pkg", "-o", "out.zip", "--exclude", "*.bak"], in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("note: left out Contents/.DS_Store (operating system junk)"))
        #expect(result.stdout.contains("note: left out Contents/__MACOSX (operating system junk)"))
        #expect(result.stdout.contains("note: left out Contents/levels/old.bak (matches --exclude '*.bak')"))
        let names = run("unzip", ["-Z1", folder.url("out.zip")]).output
        #expect(!names.contains(".DS_Store") && !names.contains("MACOSX") && !names.contains("old.bak"))
        #expect(names.contains("Contents/levels/2.json"))
    }

    @Test("--json prints one object with the documented fields, for a build and for a refusal")
    func json() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        folder.write("pkg/Contents/.DS_Store", "junk")
        let result = hcpack(["build", "pkg", "-o", "out.tar.gz", "--json"], in: folder.path)
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty)
        let object = try #require(jsonObject(result.stdout))
        #expect(object["output"] as? String == folder.url("out.tar.gz"))
        #expect(object["format"] as? String == "tar.gz")
        #expect(object["productIdentifier"] as? String == "com.example.levels")
        #expect(object["contentVersion"] as? String == "1.0")
        #expect(object["files"] as? Int == sampleFiles.count)
        #expect(object["contentBytes"] as? Int == sampleFiles.reduce(0) { $0 + $1.1.utf8.count })
        let size = try FileManager.default.attributesOfItem(atPath: folder.url("out.tar.gz"))[.size] as? Int
        #expect(object["archiveBytes"] as? Int == size)
        let digest = run("sha256sum", [folder.url("out.tar.gz")]).output.prefix(64)
        #expect(object["sha256"] as? String == String(digest))
        #expect(object["excluded"] as? [String] == ["Contents/.DS_Store"])
        #expect(object["warnings"] as? Int == 0)
        #expect((object["problems"] as? [Any])?.isEmpty == true)

        folder.remove("pkg/Contents/index.json")
        let refused = hcpack(["build", "pkg", "-o", "bad.zip", "--json"], in: folder.path)
        #expect(refused.status == 1)
        let report = try #require(jsonObject(refused.stdout))
        #expect(report["built"] as? Bool == false)
        #expect(report["output"] is NSNull)
        let problems = try #require(report["problems"] as? [[String: Any]])
        #expect(
            problems.contains { $0["rule"] as? String == "files.not-found" && $0["path"] as? String == "Contents/index.json" })
        #expect(!FileSystem.exists(folder.url("bad.zip")))
    }

    @Test("--quiet prints nothing on success")
    func quiet() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let result = hcpack(["build", "-q", "pkg", "-o", "out.zip"], in: folder.path)
        #expect(result.status == 0)
        #expect(result.stdout.isEmpty && result.stderr.isEmpty)
        #expect(FileSystem.exists(folder.url("out.zip")))
    }

    @Test("SOURCE_DATE_EPOCH from the environment, overridden by the flag")
    func sourceDateEpoch() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        func mtimes(_ name: String) throws -> Set<Int64> {
            let reader = try ArchiveReader(path: folder.url(name))
            var times: Set<Int64> = []
            while let entry = try reader.next() { times.insert(entry.modificationTime ?? -1) }
            return times
        }
        #expect(
            hcpack(["build", "pkg", "-o", "env.tar.gz"], in: folder.path, environment: ["SOURCE_DATE_EPOCH": "1234567890"]).status
                == 0)
        #expect(try mtimes("env.tar.gz") == [1_234_567_890])
        let flagged = hcpack(
            ["build", "pkg", "-o", "flag.tar.gz", "--source-date-epoch", "1500000000"], in: folder.path,
            environment: ["SOURCE_DATE_EPOCH": "1234567890"])
        #expect(flagged.status == 0)
        #expect(try mtimes("flag.tar.gz") == [1_500_000_000])
        #expect(hcpack(["build", "pkg", "-o", "default.tar.gz"], in: folder.path).status == 0)
        #expect(try mtimes("default.tar.gz") == [315_532_800])
    }

    @Test(
        "Usage mistakes exit 2",
        arguments: [
            ["build"], ["build", "pkg", "--format", "rar"], ["build", "pkg", "--compression", "lzma"],
            ["build", "pkg", "--source-date-epoch", "soon"],
            ["build", "pkg", "--source-date-epoch", "-5"], ["build", "pkg", "-o", "out.zip", "--format", "tar.gz"],
            ["build", "pkg", "-o", "out.bin"],
            ["build", "pkg", "extra"],
        ])
    func usage(_ arguments: [String]) {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let result = hcpack(arguments, in: folder.path)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("hcpack: error:"))
        #expect(listing(folder.path) == ["pkg"])
    }

    @Test("A bad SOURCE_DATE_EPOCH in the environment is a usage error")
    func badEnvironmentEpoch() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let result = hcpack(["build", "pkg", "-o", "o.zip"], in: folder.path, environment: ["SOURCE_DATE_EPOCH": "yesterday"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("SOURCE_DATE_EPOCH"))
    }

    @Test("A missing source or output folder exits 3")
    func environmentFailures() {
        let folder = TemporaryFolder()
        let missing = hcpack(["build", "nope", "-o", "o.zip"], in: folder.path)
        #expect(missing.status == 3)
        #expect(missing.stderr.contains(folder.url("nope")))
        writeValidPackage(in: folder, root: "pkg")
        let noFolder = hcpack(["build", "pkg", "-o", "no/such/o.zip"], in: folder.path)
        #expect(noFolder.status == 3)
        #expect(noFolder.stderr.contains("output folder does not exist"))
    }

    @Test("Help lists every build option")
    func help() {
        let text = hcpack(["help", "build"]).stdout
        for option in [
            "-o, --output OUTPUT", "--product-id ID", "--content-version V", "--format zip|tar.gz|dir",
            "--compression auto|store|deflate",
            "--exclude GLOB", "--source-date-epoch N", "--force", "--json", "-q, --quiet",
        ] {
            #expect(text.contains(option), "\(option)")
        }
        #expect(text.contains("Usage: hcpack build [options] SOURCE"))
    }
}

@Suite("hcpack build (the binary)", .serialized)
struct BuildBinaryTests {
    /// Makes a package with the shell under `umask`, files created in the given order, then builds it.
    func buildUnderUmask(_ folder: TemporaryFolder, name: String, umask: String, order: [String]) -> (
        status: Int32, output: String
    ) {
        var script = "set -e; umask \(umask); mkdir -p \(name)/Contents/levels \(name)/Contents/art; "
        script += "printf '%s' '\(plistXML(identityKeys))' > \(name)/ContentInfo.plist; "
        for path in order { script += "printf 'data of %s\\n' '\(path)' > \(name)/Contents/\(path); " }
        script += "touch -d @\(name == "one" ? 1_000_000_000 : 1_600_000_000) \(name)/Contents/*; "
        script += "exec '\(hcpackBinary())' build \(name) -o \(name).zip"
        return run("/bin/sh", ["-c", script], in: folder.path)
    }

    @Test("Two builds under different umasks, orders and times are byte-identical")
    func umaskAndOrder() throws {
        let folder = TemporaryFolder()
        let paths = ["index.json", "levels/1.json", "levels/2.json", "art/cover.txt"]
        let first = buildUnderUmask(folder, name: "one", umask: "077", order: paths)
        let second = buildUnderUmask(folder, name: "two", umask: "002", order: paths.reversed())
        #expect(first.status == 0 && second.status == 0, "\(first.output)\(second.output)")
        var mode = stat()
        stat(folder.url("one/Contents/index.json"), &mode)
        #expect(mode.st_mode & 0o777 == 0o600, "the umask took effect")
        let one = try #require(folder.read("one.zip"))
        let two = try #require(folder.read("two.zip"))
        #expect(one == two)
        #expect(one.count > 400)
    }

    @Test(
        "A write failure (file size limit, as for a full disk) exits 3 and leaves no temporary file: written by the output's threads (4 MiB) and on the caller's (512 KiB, HashPipeline.inlineBytes)",
        arguments: [256 << 10, 32 << 10])
    func writeFailure(copies: Int) {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg", files: [("big.bin", String(repeating: "0123456789abcdef", count: copies))])
        folder.makeFolder("out")
        // An ignored SIGXFSZ makes write(2) fail with EFBIG past the limit (in 512-byte blocks), as ENOSPC would.
        let result = run(
            "/bin/sh", ["-c", "trap '' XFSZ; ulimit -f 64; exec '\(hcpackBinary())' build pkg -o out/p.zip --compression store"],
            in: folder.path)
        #expect(result.status == 3, "\(result.output)")
        #expect(result.output.contains("free some space"))
        #expect(listing(folder.url("out")).isEmpty)
    }
}
