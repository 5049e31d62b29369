import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A hostile or broken archive that install must refuse, leaving DEST as it was.
enum HostileCase: String, CaseIterable, Sendable {
    case dotDot, absolute, symlinkOut, symlinkIn, zipSymlink, hardlink, fifo, device, duplicate, caseCollision, listedMissing,
        digestMismatch, sizeMismatch

    /// Builds the archive; `sentinel` is the folder next to DEST that must stay empty.
    func package(sentinel: String) -> PackageArchive {
        var package = PackageArchive(format: .tar)
        switch self {
        case .dotDot:
            package.format = .zip
            package.extra = [.init("../sentinel/evil.txt", data: Array("evil".utf8))]
        case .absolute:
            package.extra = [.init(sentinel + "/evil.txt", data: Array("evil".utf8))]
        case .symlinkOut:
            package.extra = [.init("Contents/out", .symlink, target: sentinel)]
        case .symlinkIn:
            package.extra = [.init("Contents/alias.json", .symlink, target: "index.json")]
            package.listed = sampleFiles.map(\.0) + ["alias.json"]
        case .zipSymlink:
            package.format = .zip
            package.extra = [.init("Contents/levels/up", .symlink, target: "../../../sentinel")]
        case .hardlink:
            package.extra = [.init("Contents/copy.json", .hardlink, target: "Contents/index.json")]
        case .fifo:
            package.extra = [.init("Contents/pipe", .fifo)]
        case .device:
            package.extra = [.init("Contents/null", .chardev)]
        case .duplicate:
            package.format = .zip
            package.extra = [.init("Contents/index.json", data: Array("{\"title\": \"Other\"}\n".utf8))]
        case .caseCollision:
            package.files.append(("INDEX.json", Array("{}".utf8)))
        case .listedMissing:
            package.listed = sampleFiles.map(\.0) + ["levels/3.json"]
        case .digestMismatch:
            package.integrityOverrides["levels/1.json"] = (13, String(repeating: "0", count: 64))
        case .sizeMismatch:
            package.integrityOverrides["levels/1.json"] = (99, String(repeating: "0", count: 64))
        }
        return package
    }

    /// The rule the report must name.
    var rule: String {
        switch self {
        case .dotDot, .absolute: "archive.unsafe-path"
        case .symlinkOut, .zipSymlink: "content.symlink-escapes"
        case .symlinkIn: "content.symlink"
        case .hardlink: "content.hardlink"
        case .fifo, .device: "content.special-file"
        case .duplicate: "archive.duplicate-entry"
        case .caseCollision: "content.case-collision"
        case .listedMissing: "files.not-found"
        case .digestMismatch: "integrity.digest-mismatch"
        case .sizeMismatch: "integrity.size-mismatch"
        }
    }
}

@Suite("hcpack install (command line)")
struct InstallCommandTests {
    /// DEST with one user file in it, and an empty sentinel folder beside it.
    func bench() -> TemporaryFolder {
        let folder = TemporaryFolder()
        folder.write("dest/mine.txt", "the user's file")
        folder.makeFolder("sentinel")
        return folder
    }

    @Test(
        "A hostile or broken archive is refused with exit 1; DEST and its surroundings stay byte-identical",
        arguments: HostileCase.allCases)
    func hostile(_ hostile: HostileCase) throws {
        let folder = bench()
        let package = hostile.package(sentinel: folder.url("sentinel"))
        let archive = package.write(to: folder.url("hostile.\(package.format.rawValue)"))
        let before = treeListing(folder.url("dest"))
        let result = hcpack(["install", archive, "--dest", "dest"], in: folder.path)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("[\(hostile.rule)]"), "\(result.stdout)")
        #expect(result.stderr.contains("nothing was written"))
        #expect(treeListing(folder.url("dest")) == before)
        #expect(treeListing(folder.url("sentinel")).isEmpty)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == [
                "dest", "hostile.\(package.format.rawValue)", "sentinel",
            ])
    }

    @Test("Every archive of the shared hostile catalogue is refused with exit 1, touching nothing", arguments: hostileArchives)
    func hostileCatalogue(_ hostile: HostileArchive) throws {
        let folder = bench()
        folder.makeFolder("input")
        let made = python(hostile.program, in: folder.url("input"))
        try #require(made.status == 0, "fixture script failed: \(made.output)")
        let before = treeListing(folder.url("dest"))
        // The entry limit as verify's hostile suite sets it, so "too many entries" trips it.
        let result = hcpack(
            ["install", folder.url("input/" + hostile.file), "--dest", "dest", "--max-entries", "1000"], in: folder.path)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(
            hostile.rules.contains { result.stdout.contains("[\($0)]") },
            "expected one of \(hostile.rules.sorted()): \(result.stdout)")
        #expect(treeListing(folder.url("dest")) == before)
        #expect(treeListing(folder.url("sentinel")).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: "/tmp/hcpack-abs"))
    }

    @Test("Round trip: hcpack build, then install, gives the source files byte for byte", arguments: ["zip", "tar.gz"])
    func buildThenInstall(_ format: String) throws {
        let folder = bench()
        writeValidPackage(in: folder, root: "pkg")
        folder.write("pkg/Contents/levels/big.bin", (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7919) })
        folder.write(
            "pkg/ContentInfo.plist",
            plistXML(
                """
                <key>IAPProductIdentifier</key><string>com.example.levels</string>
                <key>ContentVersion</key><string>1.0</string>
                \(filesXML(sampleFiles.map(\.0) + ["levels/big.bin"]))
                """))
        let built = hcpack(["build", "pkg", "-o", "p.\(format)"], in: folder.path)
        try #require(built.status == 0, "\(built.stdout)\(built.stderr)")
        let result = hcpack(["install", "p.\(format)", "--dest", "dest", "--json"], in: folder.path)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(jsonObject(result.stdout)?["installed"] as? [String] == (sampleFiles.map(\.0) + ["levels/big.bin"]).sorted())
        for path in sampleFiles.map(\.0) + ["levels/big.bin"] {
            #expect(folder.read("dest/" + path) == folder.read("pkg/Contents/" + path), "\(path)")
        }
        #expect(folder.read("dest/mine.txt") == Array("the user's file".utf8))
        let again = hcpack(["install", "p.\(format)", "--dest", "dest", "--json"], in: folder.path)
        #expect(jsonObject(again.stdout)?["status"] as? String == "unchanged")
    }

    @Test("Every missing or damaged listed file is reported in one run")
    func allProblemsTogether() {
        let folder = bench()
        var package = PackageArchive()
        package.listed = sampleFiles.map(\.0) + ["gone.json"]
        package.integrityOverrides["index.json"] = (20, String(repeating: "a", count: 64))
        package.integrityOverrides["levels/2.json"] = (13, String(repeating: "b", count: 64))
        let result = hcpack(["install", package.write(to: folder.url("p.zip")), "--dest", folder.url("dest")])
        #expect(result.status == 1)
        #expect(result.stdout.contains("[files.not-found] Contents/gone.json"))
        #expect(result.stdout.contains("[integrity.digest-mismatch] Contents/index.json"))
        #expect(result.stdout.contains("[integrity.digest-mismatch] Contents/levels/2.json"))
        #expect(!FileManager.default.fileExists(atPath: folder.url("dest/index.json")))
    }

    @Test("--json reports what was installed, skipped and removed")
    func json() throws {
        let folder = bench()
        let v1 = PackageArchive(files: [("a.txt", "a"), ("b.txt", "b")]).write(to: folder.url("v1.zip"))
        let v2 = PackageArchive(version: "1.1", files: [("a.txt", "a"), ("c.txt", "c")]).write(to: folder.url("v2.zip"))
        let first = hcpack(["install", v1, "--dest", "dest", "--json"], in: folder.path)
        #expect(first.status == 0, "\(first.stderr)")
        let installed = try #require(jsonObject(first.stdout))
        #expect(installed["status"] as? String == "installed")
        #expect(installed["installed"] as? [String] == ["a.txt", "b.txt"])
        #expect(installed["previousVersion"] is NSNull)
        #expect(installed["bytes"] as? Int == 2)

        let second = hcpack(["install", v2, "--dest", "dest", "--json"], in: folder.path)
        let upgraded = try #require(jsonObject(second.stdout))
        #expect(upgraded["status"] as? String == "upgraded")
        #expect(upgraded["productIdentifier"] as? String == "com.example.levels")
        #expect(upgraded["version"] as? String == "1.1")
        #expect(upgraded["previousVersion"] as? String == "1.0")
        #expect(upgraded["installed"] as? [String] == ["c.txt"])
        #expect(upgraded["skipped"] as? [String] == ["a.txt"])
        #expect(upgraded["removed"] as? [String] == ["b.txt"])

        let third = hcpack(["install", v2, "--dest", "dest", "--json"], in: folder.path)
        #expect(jsonObject(third.stdout)?["status"] as? String == "unchanged")
    }

    @Test("Text output names the product, and --quiet prints nothing")
    func text() {
        let folder = bench()
        let archive = PackageArchive().write(to: folder.url("p.tar"))
        let result = hcpack(["install", archive, "--dest", "dest"], in: folder.path)
        #expect(result.status == 0)
        #expect(result.stdout.contains("installed com.example.levels 1.0"))
        #expect(result.stdout.contains("4 files placed"))
        let again = hcpack(["install", archive, "--dest", "dest", "--quiet"], in: folder.path)
        #expect(again.status == 0)
        #expect(again.stdout.isEmpty && again.stderr.isEmpty)
    }

    @Test("An upgrade says which modified file it kept")
    func keptMessage() {
        let folder = bench()
        let v1 = PackageArchive(files: [("a.txt", "a"), ("b.txt", "b")]).write(to: folder.url("v1.zip"))
        let v2 = PackageArchive(version: "2", files: [("a.txt", "a")]).write(to: folder.url("v2.zip"))
        #expect(hcpack(["install", v1, "--dest", "dest"], in: folder.path).status == 0)
        folder.write("dest/b.txt", "b, edited")
        let result = hcpack(["install", v2, "--dest", "dest"], in: folder.path)
        #expect(result.status == 0)
        #expect(
            result.stdout.contains("kept \(folder.url("dest/b.txt")): the previous version installed it, but it changed since"))
        #expect(result.stdout.contains("upgraded com.example.levels 2 (was 1.0)"))
        #expect(folder.read("dest/b.txt") == Array("b, edited".utf8))
    }

    @Test("Refusals exit 1: wrong product, wrong version, downgrade, user file; --force overrides the last two")
    func refusals() {
        let folder = bench()
        folder.write("dest/index.json", "user index")
        let v2 = PackageArchive(version: "2.0").write(to: folder.url("v2.zip"))
        let v1 = PackageArchive(version: "1.0").write(to: folder.url("v1.zip"))
        let wrongProduct = hcpack(["install", v2, "--dest", "dest", "--expect-product-id", "com.example.other"], in: folder.path)
        #expect(wrongProduct.status == 1)
        #expect(wrongProduct.stderr.contains("not the expected 'com.example.other'"))
        let wrongVersion = hcpack(["install", v2, "--dest", "dest", "--expect-version", "2.1"], in: folder.path)
        #expect(wrongVersion.status == 1)
        #expect(wrongVersion.stderr.contains("not the expected 2.1"))
        let blocked = hcpack(["install", v2, "--dest", "dest"], in: folder.path)
        #expect(blocked.status == 1)
        #expect(blocked.stderr.contains(folder.url("dest/index.json")))
        #expect(blocked.stderr.contains("--force"))
        #expect(folder.read("dest/index.json") == Array("user index".utf8))
        #expect(hcpack(["install", v2, "--dest", "dest", "--force", "--expect-version", "2"], in: folder.path).status == 0)
        let downgrade = hcpack(["install", v1, "--dest", "dest"], in: folder.path)
        #expect(downgrade.status == 1)
        #expect(downgrade.stderr.contains("older 1.0"))
        #expect(hcpack(["install", v1, "--dest", "dest", "--force"], in: folder.path).status == 0)
        #expect(folder.read("dest/mine.txt") == Array("the user's file".utf8))
    }

    @Test("--all and the missing Files key")
    func allFlag() {
        let folder = bench()
        var package = PackageArchive()
        package.filesKey = false
        let archive = package.write(to: folder.url("p.zip"))
        let installed = hcpack(["install", archive, "--dest", "dest"], in: folder.path)
        #expect(installed.status == 0)
        #expect(installed.stderr.contains("warning: [plist.files-missing]"))
        #expect(!installed.stdout.contains("plist.files-missing"))
        #expect(folder.read("dest/art/Café.txt") == Array("non-ASCII name\n".utf8))
        #expect(hcpack(["install", archive, "--dest", "dest", "--all"], in: folder.path).status == 0)
    }

    @Test("Usage and environment errors: no --dest exits 2, a missing DEST or archive exits 3, a held lock exits 3")
    func exitCodes() {
        let folder = bench()
        let archive = PackageArchive().write(to: folder.url("p.zip"))
        #expect(hcpack(["install", archive], in: folder.path).status == 2)
        #expect(hcpack(["install", archive, "--dest", "dest", "--expect-version", "one"], in: folder.path).status == 2)
        #expect(hcpack(["install", archive, "--dest", "dest", "--max-ratio", "zero"], in: folder.path).status == 2)
        let missing = hcpack(["install", archive, "--dest", "nowhere"], in: folder.path)
        #expect(missing.status == 3)
        #expect(missing.stderr.contains("nowhere: no such folder"))
        #expect(hcpack(["install", "nothing.zip", "--dest", "dest"], in: folder.path).status == 3)
        folder.makeFolder("dest/.hcpack")
        let descriptor = open(folder.url("dest/.hcpack/lock"), O_RDWR | O_CREAT, 0o644)
        #expect(flock(descriptor, LOCK_EX) == 0)
        let locked = hcpack(["install", archive, "--dest", "dest"], in: folder.path)
        close(descriptor)
        #expect(locked.status == 3)
        #expect(locked.stderr.contains("another hcpack install is running in"))
    }

    @Test("--max-entries and --max-bytes refuse archives past the limit with exit 1")
    func limits() {
        let folder = bench()
        let archive = PackageArchive().write(to: folder.url("p.zip"))
        let before = treeListing(folder.url("dest"))
        let entries = hcpack(["install", archive, "--dest", "dest", "--max-entries", "3"], in: folder.path)
        #expect(entries.status == 1)
        #expect(entries.stdout.contains("[archive.limit-exceeded]"))
        let bytes = hcpack(["install", archive, "--dest", "dest", "--max-bytes", "100"], in: folder.path)
        #expect(bytes.status == 1)
        #expect(bytes.stdout.contains("[archive.limit-exceeded]"))
        #expect(treeListing(folder.url("dest")) == before)
        #expect(
            hcpack(["install", archive, "--dest", "dest", "--max-entries", "20", "--max-bytes", "100000"], in: folder.path).status
                == 0)
    }

    @Test("help lists the install options")
    func help() {
        let result = hcpack(["help", "install"])
        #expect(result.status == 0)
        for option in [
            "--dest DIR", "--all", "--expect-product-id ID", "--expect-version V", "--force", "--wait", "--max-bytes N",
            "--max-entries N", "--max-ratio R", "--json", "--quiet",
        ] {
            #expect(result.stdout.contains(option), "\(option)")
        }
    }
}
