import Foundation
import HostedContent
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A file and an empty folder beside DEST, which a planted record names through `..`.
private struct Outside {
    let victim = "victim bytes\n"

    init(_ bench: InstallBench) {
        bench.folder.write("outside/victim.txt", victim)
        bench.folder.makeFolder("outside/empty")
    }

    /// Entries reaching them: the victim with its true size and digest, and a file that does not exist in the
    /// empty folder (a path of the previous version that is gone has its folders removed when empty).
    var entries: [InstalledFile] {
        [
            InstalledFile(path: "../outside/victim.txt", size: Int64(victim.utf8.count), sha256: sha256Hex(victim)),
            InstalledFile(path: "../outside/empty/none.txt", size: 1, sha256: sha256Hex("x")),
        ]
    }

    func survived(_ bench: InstallBench) {
        #expect(bench.folder.read("outside/victim.txt") == Array(victim.utf8), "the file outside DEST was removed")
        var isFolder: ObjCBool = false
        #expect(
            FileManager.default.fileExists(atPath: bench.folder.url("outside/empty"), isDirectory: &isFolder)
                && isFolder.boolValue)
    }
}

@Suite("install: DEST's own records are untrusted input")
struct InstallRecordsTests {
    static let product = "com.example.levels"
    static let receiptPath = "dest/.hcpack/receipts/com.example.levels.json"
    static let journalPath = "dest/.hcpack/journal-com.example.levels.json"

    @Test("A receipt listing '..' paths: refused with how to recover, nothing outside DEST touched, --force sets it aside")
    func receiptReachingOutside() throws {
        let bench = InstallBench()
        let outside = Outside(bench)
        try bench.installed(bench.archive(PackageArchive(files: [("a.txt", "one")]), name: "v1"))
        let planted = InstallReceipt(
            productIdentifier: Self.product, version: "1.0",
            files: [InstalledFile(path: "a.txt", size: 3, sha256: sha256Hex("one"))] + outside.entries)
        bench.folder.write(Self.receiptPath, planted.encoded())
        let v2 = bench.archive(PackageArchive(version: "2", files: [("a.txt", "two")]), name: "v2")
        do {
            _ = try bench.install(v2)
            Issue.record("installed with a receipt naming paths outside DEST")
        } catch {
            #expect(error.code == .invalidPackage)
            #expect(error.message.contains("receipts/com.example.levels.json"), "\(error.message)")
            #expect(error.message.contains("../outside/"), "\(error.message)")
            #expect(error.message.contains("--force") && error.message.contains("remove the file"), "\(error.message)")
        }
        outside.survived(bench)
        #expect(bench.read("a.txt") == Array("one".utf8))
        let result = try bench.installed(v2) { $0.force = true }
        #expect(result.removed.isEmpty && result.previousVersion == nil)
        outside.survived(bench)
        let bytes = try #require(bench.folder.read(Self.receiptPath))
        let rewritten = try #require(InstallReceipt.decode(bytes))
        #expect(rewritten.files.map(\.path) == ["a.txt"])
    }

    @Test("A journal listing '..' paths (a same-version reinstall): refused, nothing outside DEST touched")
    func journalReachingOutside() throws {
        let bench = InstallBench()
        let outside = Outside(bench)
        let archive = bench.archive(PackageArchive(files: [("a.txt", "one")]))
        try bench.installed(archive)
        let planted = InstallJournal(productIdentifier: Self.product, version: "1.0", files: outside.entries)
        bench.folder.write(Self.journalPath, planted.encoded())
        do {
            _ = try bench.install(archive)
            Issue.record("installed with a journal naming paths outside DEST")
        } catch {
            #expect(error.message.contains("journal-com.example.levels.json"), "\(error.message)")
            #expect(error.message.contains("--force"), "\(error.message)")
        }
        outside.survived(bench)
        let result = try bench.installed(archive) { $0.force = true }
        #expect(result.removed.isEmpty)
        outside.survived(bench)
        #expect(!FileManager.default.fileExists(atPath: bench.folder.url(Self.journalPath)))
    }

    @Test("Absolute, .hcpack/ and empty-component paths in a receipt make it unusable too")
    func otherUnusablePaths() throws {
        for path in ["/etc/passwd", ".hcpack/lock", "a//b.txt", "a/./b.txt"] {
            let bench = InstallBench()
            let archive = bench.archive(PackageArchive(files: [("a.txt", "one")]))
            try bench.installed(archive)
            let planted = InstallReceipt(
                productIdentifier: Self.product, version: "1.0",
                files: [InstalledFile(path: path, size: 1, sha256: sha256Hex("x"))])
            bench.folder.write(Self.receiptPath, planted.encoded())
            #expect(throws: HCPackError.self, "\(path)") { try bench.install(archive) }
            #expect(bench.read("a.txt") == Array("one".utf8))
        }
    }

    @Test("A receipt past the size limit is refused before it is read (a sparse 200 MB one), and set aside with --force")
    func oversizedReceipt() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive(files: [("a.txt", "one")]))
        try bench.installed(archive)
        let path = bench.folder.url(Self.receiptPath)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 200 << 20)
        try handle.close()
        do {
            _ = try bench.install(archive)
            Issue.record("a 200 MB receipt was accepted")
        } catch {
            #expect(error.message.contains("larger than"), "\(error.message)")
        }
        let result = try bench.installed(archive) { $0.force = true }
        #expect(result.status == .installed)
        #expect(try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) < 4096)
    }

    @Test("The platform layer refuses '..' in removals and renames, whatever the caller checked")
    func parentComponentRefused() throws {
        let bench = InstallBench()
        bench.folder.write("outside/victim.txt", "v")
        let dest = try DirectoryHandle.open(bench.dest)
        #expect(throws: HCPackError.self) { try dest.removeFile("../outside/victim.txt") }
        #expect(throws: HCPackError.self) { try dest.removeTree("../outside") }
        #expect(throws: HCPackError.self) { try dest.openDirectory("..") }
        #expect(throws: HCPackError.self) { try dest.rename("../outside/victim.txt", to: dest, "stolen.txt") }
        #expect(!dest.removeEmptyDirectory("../outside"))
        #expect(bench.folder.read("outside/victim.txt") == Array("v".utf8))
        // Names that merely contain dots are names.
        bench.folder.write("dest/..a", "x")
        #expect(try dest.removeFile("..a"))
    }

    // MARK: Ownership

    static func product(_ identifier: String, version: String = "1.0", _ files: [(String, String)]) -> PackageArchive {
        var package = PackageArchive(version: version, files: files)
        package.product = identifier
        return package
    }

    @Test("A path two products list stays while either does: upgrading one that drops it leaves it to the other")
    func sharedPath() throws {
        let bench = InstallBench()
        let font = "font bytes"
        try bench.installed(
            bench.archive(Self.product("com.example.one", [("shared/font.ttf", font), ("one.txt", "1")]), name: "one"))
        let second = try bench.installed(
            bench.archive(Self.product("com.example.two", [("shared/font.ttf", font), ("two.txt", "2")]), name: "two"))
        #expect(second.skipped == ["shared/font.ttf"])
        let upgraded = try bench.installed(
            bench.archive(Self.product("com.example.one", version: "2", [("one.txt", "1b")]), name: "one2"))
        #expect(upgraded.removed.isEmpty, "\(upgraded.removed)")
        #expect(bench.read("shared/font.ttf") == Array(font.utf8))
        // Once no product lists it, it goes.
        let last = try bench.installed(
            bench.archive(Self.product("com.example.two", version: "2", [("two.txt", "2b")]), name: "two2"))
        #expect(last.removed == ["shared/font.ttf"])
    }

    @Test("Installing a path another product owns with other bytes is refused, naming both, even with --force")
    func ownedPathConflict() throws {
        let bench = InstallBench()
        try bench.installed(bench.archive(Self.product("com.example.one", [("shared/font.ttf", "one's font")]), name: "one"))
        let two = bench.archive(Self.product("com.example.two", [("shared/font.ttf", "two's font")]), name: "two")
        for force in [false, true] {
            do {
                _ = try bench.install(two) { $0.force = force }
                Issue.record("overwrote another product's file (force: \(force))")
            } catch {
                #expect(error.code == .invalidPackage)
                #expect(
                    error.message.contains("'com.example.one'") && error.message.contains("'com.example.two'"), "\(error.message)"
                )
            }
        }
        #expect(bench.read("shared/font.ttf") == Array("one's font".utf8))
    }

    // MARK: Names the file system folds

    @Test(
        "A name changed only in case on a case-insensitive DEST (two names, one file: a hard link here) is not removed as stale")
    func caseOnlyRename() throws {
        let bench = InstallBench()
        try bench.installed(bench.archive(PackageArchive(files: [("levels/Level1.json", "level")]), name: "v1"))
        // On a case-insensitive file system, level1.json reaches the file installed as Level1.json.
        #expect(link(bench.dest + "/levels/Level1.json", bench.dest + "/levels/level1.json") == 0)
        let result = try bench.installed(
            bench.archive(PackageArchive(version: "2", files: [("levels/level1.json", "level")]), name: "v2"))
        #expect(result.removed.isEmpty, "\(result.removed)")
        #expect(bench.read("levels/level1.json") == Array("level".utf8))
        #expect(bench.read("levels/Level1.json") == Array("level".utf8))
    }

    @Test("A name changed in case with new bytes replaces the file it reaches, not refused as a user file")
    func caseOnlyRenameNewBytes() throws {
        let bench = InstallBench()
        try bench.installed(bench.archive(PackageArchive(files: [("levels/Level1.json", "level")]), name: "v1"))
        #expect(link(bench.dest + "/levels/Level1.json", bench.dest + "/levels/level1.json") == 0)
        let result = try bench.installed(
            bench.archive(PackageArchive(version: "2", files: [("levels/level1.json", "level 2")]), name: "v2"))
        #expect(result.installed == ["levels/level1.json"])
        #expect(bench.read("levels/level1.json") == Array("level 2".utf8))
    }

    // MARK: Recovery after a crash

    /// DEST as a kill during the upgrade from 1 to 2 leaves it: the journal of version 2 written, a.txt
    /// placed (same size as before), c.txt not yet.
    static func killedMidUpgrade(_ bench: InstallBench) {
        let v2 = [("a.txt", "a 2"), ("b.txt", "b 2"), ("c.txt", "c 2")]
        bench.folder.write("dest/a.txt", "a 2")
        let journal = InstallJournal(
            productIdentifier: product, version: "2",
            files: v2.map { InstalledFile(path: $0.0, size: Int64($0.1.utf8.count), sha256: sha256Hex($0.1)) })
        bench.folder.write(journalPath, journal.encoded())
    }

    @Test("After a kill mid-upgrade, the old version and the new one both install without --force")
    func killMidUpgrade() throws {
        let bench = InstallBench()
        let v1 = bench.archive(PackageArchive(files: [("a.txt", "a 1"), ("b.txt", "b 1")]), name: "v1")
        let v2 = bench.archive(
            PackageArchive(version: "2", files: [("a.txt", "a 2"), ("b.txt", "b 2"), ("c.txt", "c 2")]), name: "v2")
        try bench.installed(v1)
        Self.killedMidUpgrade(bench)
        let old = try bench.installed(v1)
        #expect(old.installed == ["a.txt"] && old.skipped == ["b.txt"])
        #expect(bench.read("a.txt") == Array("a 1".utf8))
        Self.killedMidUpgrade(bench)
        let new = try bench.installed(v2)
        #expect(new.status == .upgraded)
        #expect(bench.read("a.txt") == Array("a 2".utf8) && bench.read("b.txt") == Array("b 2".utf8))
        #expect(bench.read("c.txt") == Array("c 2".utf8))
        #expect(!FileManager.default.fileExists(atPath: bench.folder.url(Self.journalPath)))
    }

    // MARK: Rollback

    @Test("A failing install keeps what the user wrote meanwhile: a file in a folder moved in whole, a new file replaced")
    func userWritesDuringFailingInstall() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive(files: [("a.txt", "ours"), ("media/b.txt", "b"), ("media/c/d.txt", "d")]))
        var meddled = false
        let options = InstallOptions(destination: bench.dest)
        do {
            _ = try Installer.install(archive, options: options) { update in
                guard update.phase == "installing", update.completedFiles == update.totalFiles, !meddled else { return }
                meddled = true
                // The user, while the install runs: a file in media/ (moved in whole), a.txt replaced.
                bench.folder.write("dest/media/mine.txt", "user's")
                _ = unlink(bench.dest + "/a.txt")
                bench.folder.write("dest/a.txt", "user's a")
                // And the receipt cannot be written: a file where its folder goes.
                bench.folder.write("dest/.hcpack/receipts", "in the way")
            }
            Issue.record("the install went through")
        } catch {
            #expect(error.message.contains("media"), "the folder left in place is reported: \(error.message)")
        }
        #expect(meddled)
        #expect(bench.read("media/mine.txt") == Array("user's".utf8), "rollback removed a file the user wrote")
        #expect(bench.read("a.txt") == Array("user's a".utf8), "rollback removed a file the user wrote")
    }
}
