import Digest
import Foundation
import HostedContent
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A destination folder with a sentinel folder next to it (to prove nothing is written beside DEST).
final class InstallBench {
    let folder = TemporaryFolder()
    var dest: String { folder.url("dest") }
    var sentinel: String { folder.url("sentinel") }

    init() {
        folder.makeFolder("dest")
        folder.makeFolder("sentinel")
    }

    func archive(_ package: PackageArchive, name: String = "p") -> String {
        package.write(to: folder.url("\(name).\(package.format.rawValue)"))
    }

    func install(_ archive: String, _ configure: (inout InstallOptions) -> Void = { _ in }) throws(HCPackError) -> InstallOutcome
    {
        var options = InstallOptions(destination: dest)
        configure(&options)
        return try Installer.install(archive, options: options)
    }

    /// Installs and requires success.
    @discardableResult
    func installed(_ archive: String, _ configure: (inout InstallOptions) -> Void = { _ in }) throws(HCPackError) -> InstallResult
    {
        let outcome = try install(archive, configure)
        guard case .completed(let result) = outcome else {
            if case .rejected(let report) = outcome { Issue.record("rejected: \(report.problems.problems)") }
            throw HCPackError(.io, "install was rejected")
        }
        return result
    }

    func read(_ path: String) -> [UInt8]? { folder.read("dest/" + path) }

    func status(_ path: String) -> stat? {
        var info = stat()
        return lstat(dest + "/" + path, &info) == 0 ? info : nil
    }
}

@Suite("install: domain")
struct InstallTests {
    @Test(
        "An archive installs byte for byte, with mode 0644, a receipt and no leftovers",
        arguments: [PackageArchive.Format.zip, .tgz])
    func roundTrip(_ format: PackageArchive.Format) throws {
        let bench = InstallBench()
        let package = PackageArchive(format: format)
        let result = try bench.installed(bench.archive(package))
        #expect(result.status == .installed)
        #expect(result.installed == sampleFiles.map(\.0).sorted())
        #expect(result.bytes == Int64(sampleFiles.reduce(0) { $0 + $1.1.utf8.count }))
        for (path, text) in sampleFiles {
            #expect(bench.read(path) == Array(text.utf8), "\(path)")
            #expect(bench.status(path).map { $0.st_mode & 0o7777 } == 0o644, "\(path)")
        }
        let receipt = try #require(bench.folder.read("dest/.hcpack/receipts/com.example.levels.json"))
        let decoded = try #require(InstallReceipt.decode(receipt))
        #expect(decoded.version == "1.0")
        #expect(decoded.files.map(\.path) == sampleFiles.map(\.0).sorted())
        let metadata = try FileManager.default.contentsOfDirectory(atPath: bench.dest + "/.hcpack").sorted()
        #expect(metadata == ["lock", "receipts"], "no staging folder or journal left")
        #expect(try FileManager.default.contentsOfDirectory(atPath: bench.sentinel).isEmpty)
    }

    @Test("A package in a single top-level folder installs from that folder's Contents/")
    func rootFolder() throws {
        let bench = InstallBench()
        var package = PackageArchive()
        package.root = "levels-1.0"
        try bench.installed(bench.archive(package))
        #expect(bench.read("levels/2.json") == Array("{\"level\": 2}\n".utf8))
        #expect(bench.status("levels-1.0") == nil)
    }

    @Test("An upgrade replaces changed files, removes dropped ones, and keeps a dropped file the user modified")
    func upgrade() throws {
        let bench = InstallBench()
        let v1 = PackageArchive(files: [
            ("a.txt", "a1"), ("same.txt", "same"), ("old/gone.txt", "gone"), ("edited.txt", "original"),
        ])
        try bench.installed(bench.archive(v1, name: "v1"))
        let sameInode = try #require(bench.status("same.txt")).st_ino
        bench.folder.write("dest/edited.txt", "the user changed this")

        let v2 = PackageArchive(version: "1.1", files: [("a.txt", "a2"), ("same.txt", "same"), ("new/b.txt", "b")])
        let result = try bench.installed(bench.archive(v2, name: "v2"))
        #expect(result.status == .upgraded)
        #expect(result.previousVersion == "1.0")
        #expect(result.installed == ["a.txt", "new/b.txt"])
        #expect(result.skipped == ["same.txt"])
        #expect(result.removed == ["old/gone.txt"])
        #expect(result.kept == ["edited.txt"])
        #expect(bench.read("a.txt") == Array("a2".utf8))
        #expect(bench.read("edited.txt") == Array("the user changed this".utf8))
        #expect(bench.status("old") == nil, "the folder that only held the removed file is gone")
        #expect(bench.status("same.txt")?.st_ino == sameInode, "an identical file is not rewritten")
        let receipt = try #require(
            bench.folder.read("dest/.hcpack/receipts/com.example.levels.json").flatMap(InstallReceipt.decode))
        #expect(receipt.version == "1.1")
        #expect(receipt.files.map(\.path) == ["a.txt", "new/b.txt", "same.txt"])
    }

    @Test("Installing the same version again writes nothing: inodes and mtimes stay")
    func sameVersionNoOp() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive())
        try bench.installed(archive)
        let before = sampleFiles.map { bench.status($0.0) }
        let receiptBefore = bench.status(".hcpack/receipts/com.example.levels.json")
        usleep(20_000)
        let result = try bench.installed(archive)
        #expect(result.status == .unchanged)
        #expect(result.installed.isEmpty)
        #expect(result.skipped.count == sampleFiles.count)
        for (index, (path, _)) in sampleFiles.enumerated() {
            let after = try #require(bench.status(path))
            #expect(after.st_ino == before[index]?.st_ino, "\(path)")
            #expect(
                after.st_mtim.tv_sec == before[index]?.st_mtim.tv_sec && after.st_mtim.tv_nsec == before[index]?.st_mtim.tv_nsec,
                "\(path)")
        }
        #expect(bench.status(".hcpack/receipts/com.example.levels.json")?.st_mtim.tv_nsec == receiptBefore?.st_mtim.tv_nsec)
    }

    @Test("Files DEST already holds with the recorded bytes are not staged again (no free space needed for them)")
    func inPlaceFilesAreNotStaged() throws {
        let bench = InstallBench()
        let v1 = PackageArchive(files: [("a.txt", "same"), ("b.txt", "one")])
        #expect(try bench.installed(bench.archive(v1, name: "v1")).stagedBytes == 7)
        #expect(try bench.installed(bench.archive(v1, name: "v1")).stagedBytes == 0)
        let v2 = PackageArchive(version: "2", files: [("a.txt", "same"), ("b.txt", "two!")])
        let result = try bench.installed(bench.archive(v2, name: "v2"))
        #expect(result.stagedBytes == 4, "only b.txt changed")
        #expect(result.skipped == ["a.txt"])
        #expect(bench.read("b.txt") == Array("two!".utf8))
    }

    @Test("A same-size edit of an installed file is caught although the file was not staged; --force restores it")
    func sameSizeEdit() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive(files: [("a.txt", "original")]))
        try bench.installed(archive)
        bench.folder.write("dest/a.txt", "ORIGINAL")
        do {
            _ = try bench.install(archive)
            Issue.record("the edited file was overwritten or accepted")
        } catch {
            #expect(error.code == .invalidPackage)
            #expect(error.message.contains("a.txt"))
        }
        #expect(bench.read("a.txt") == Array("ORIGINAL".utf8))
        let forced = try bench.installed(archive) { $0.force = true }
        #expect(forced.installed == ["a.txt"])
        #expect(bench.read("a.txt") == Array("original".utf8))
    }

    @Test("A same-version install restores a file the user deleted")
    func repair() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive())
        try bench.installed(archive)
        bench.folder.remove("dest/index.json")
        let result = try bench.installed(archive)
        #expect(result.status == .installed)
        #expect(result.installed == ["index.json"])
        #expect(bench.read("index.json") == Array(sampleFiles[0].1.utf8))
    }

    @Test("Files in DEST that no package lists survive installs and upgrades")
    func userFilesSurvive() throws {
        let bench = InstallBench()
        bench.folder.write("dest/notes.txt", "mine")
        bench.folder.write("dest/levels/custom.json", "my level")
        try bench.installed(bench.archive(PackageArchive(), name: "v1"))
        try bench.installed(bench.archive(PackageArchive(version: "2", files: [("index.json", "v2")]), name: "v2"))
        #expect(bench.read("notes.txt") == Array("mine".utf8))
        #expect(bench.read("levels/custom.json") == Array("my level".utf8))
        #expect(bench.status("levels/1.json") == nil, "v1's file was removed")
        #expect(bench.status("levels") != nil, "a folder holding a user file stays")
    }

    @Test("A downgrade is refused, and allowed with force")
    func downgrade() throws {
        let bench = InstallBench()
        try bench.installed(bench.archive(PackageArchive(version: "2.0", files: [("a.txt", "two")]), name: "v2"))
        let old = bench.archive(PackageArchive(version: "1.9", files: [("a.txt", "one")]), name: "v1")
        let before = treeListing(bench.dest)
        #expect(throws: HCPackError.self) { try bench.install(old) }
        do {
            _ = try bench.install(old)
        } catch {
            #expect(error.code == .invalidPackage)
            #expect(error.message.contains("--force"))
        }
        #expect(treeListing(bench.dest) == before)
        let result = try bench.installed(old) { $0.force = true }
        #expect(result.status == .downgraded)
        #expect(bench.read("a.txt") == Array("one".utf8))
    }

    @Test("A file hcpack did not install is never overwritten, unless force")
    func userFileInTheWay() throws {
        let bench = InstallBench()
        bench.folder.write("dest/index.json", "the user's own index")
        let archive = bench.archive(PackageArchive())
        let before = treeListing(bench.dest)
        do {
            _ = try bench.install(archive)
            Issue.record("the install went through")
        } catch {
            #expect(error.code == .invalidPackage)
            #expect(error.message.contains(bench.dest + "/index.json"))
        }
        #expect(treeListing(bench.dest) == before, "DEST untouched, no .hcpack left behind")
        try bench.installed(archive) { $0.force = true }
        #expect(bench.read("index.json") == Array(sampleFiles[0].1.utf8))
    }

    @Test("A file the user modified after install blocks a same-path upgrade, unless force")
    func modifiedInstalledFile() throws {
        let bench = InstallBench()
        try bench.installed(bench.archive(PackageArchive(files: [("a.txt", "one")]), name: "v1"))
        bench.folder.write("dest/a.txt", "edited")
        let v2 = bench.archive(PackageArchive(version: "2", files: [("a.txt", "two")]), name: "v2")
        #expect(throws: HCPackError.self) { try bench.install(v2) }
        #expect(bench.read("a.txt") == Array("edited".utf8))
        try bench.installed(v2) { $0.force = true }
        #expect(bench.read("a.txt") == Array("two".utf8))
    }

    @Test("Expected product and version are enforced")
    func expectations() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive(version: "1.2"))
        for configure: (inout InstallOptions) -> Void in [
            { $0.expectedProductIdentifier = "com.example.other" }, { $0.expectedVersion = "1.3" },
        ] {
            do {
                _ = try bench.install(archive, configure)
                Issue.record("the install went through")
            } catch {
                #expect(error.code == .invalidPackage)
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: bench.dest).isEmpty)
        let result = try bench.installed(archive) {
            $0.expectedProductIdentifier = "com.example.levels"
            $0.expectedVersion = "1.2.0"
        }
        #expect(result.version == "1.2")
    }

    @Test("Without a Files key install selects every file under Contents/, as --all does, and warns")
    func missingFilesKey() throws {
        let bench = InstallBench()
        var package = PackageArchive()
        package.filesKey = false
        let archive = bench.archive(package)
        let result = try bench.installed(archive)
        #expect(result.selection == .contents)
        #expect(result.installed == sampleFiles.map(\.0).sorted())
        #expect(result.report.problems.problems.map(\.rule) == [.filesKeyMissing])
        let listed = try bench.installed(bench.archive(PackageArchive(version: "1.1")))
        #expect(listed.selection == .files)
    }

    @Test("--all also installs files that Files does not list")
    func allWithFilesKey() throws {
        let bench = InstallBench()
        var package = PackageArchive()
        package.listed = ["index.json"]
        let archive = bench.archive(package)
        #expect(try bench.installed(archive).installed == ["index.json"])
        let result = try bench.installed(archive) { $0.installAll = true }
        #expect(result.installed == ["art/Café.txt", "levels/1.json", "levels/2.json"])
    }

    @Test("A leftover journal marks files of an interrupted install as ours, and stale staging is removed")
    func journalRecovery() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive(files: [("a.txt", "new a"), ("b.txt", "b")]))
        // What a kill after the first rename leaves: the journal, one file placed, a staging folder.
        bench.folder.write("dest/a.txt", "new a")
        bench.folder.write("dest/.hcpack/staging-dead0000/Contents/b.txt", "b")
        let journal = InstallJournal(
            productIdentifier: "com.example.levels", version: "1.0",
            files: [
                InstalledFile(path: "a.txt", size: 5, sha256: sha256Hex("new a")),
                InstalledFile(path: "b.txt", size: 1, sha256: sha256Hex("b")),
            ])
        bench.folder.write("dest/.hcpack/journal-com.example.levels.json", journal.encoded())
        let result = try bench.installed(archive)
        #expect(result.installed == ["b.txt"])
        #expect(result.skipped == ["a.txt"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: bench.dest + "/.hcpack").sorted() == ["lock", "receipts"])
    }

    @Test("A journaled file whose bytes changed is treated as a user file")
    func journalDoesNotCoverChangedFiles() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive(files: [("a.txt", "new a")]))
        bench.folder.write("dest/a.txt", "partial or user bytes")
        let journal = InstallJournal(
            productIdentifier: "com.example.levels", version: "1.0",
            files: [InstalledFile(path: "a.txt", size: 5, sha256: sha256Hex("new a"))])
        bench.folder.write("dest/.hcpack/journal-com.example.levels.json", journal.encoded())
        #expect(throws: HCPackError.self) { try bench.install(archive) }
        #expect(bench.read("a.txt") == Array("partial or user bytes".utf8))
    }

    @Test("DEST must exist, be a folder and not be a symlink")
    func destinationChecks() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive())
        var options = InstallOptions(destination: bench.folder.url("missing"))
        #expect(throws: HCPackError.self) { try Installer.install(archive, options: options) }
        do { _ = try Installer.install(archive, options: options) } catch { #expect(error.code == .notFound) }
        try FileManager.default.createSymbolicLink(atPath: bench.folder.url("link"), withDestinationPath: bench.dest)
        options.destination = bench.folder.url("link")
        do {
            _ = try Installer.install(archive, options: options)
            Issue.record("installed through a symlink")
        } catch {
            #expect(error.message.contains("symlink"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: bench.dest).isEmpty)
    }

    @Test("A symlink inside DEST is never followed: the install refuses to write through it")
    func symlinkInsideDestination() throws {
        let bench = InstallBench()
        try FileManager.default.createSymbolicLink(atPath: bench.dest + "/levels", withDestinationPath: bench.sentinel)
        do {
            _ = try bench.install(bench.archive(PackageArchive()), { $0.force = true })
            Issue.record("installed through a symlink")
        } catch {
            #expect(error.code == .invalidPackage)
            #expect(error.message.contains("levels"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: bench.sentinel).isEmpty)
    }

    @Test("Progress reports unpacking, then installing up to every byte and file")
    func progress() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive())
        var updates: [ProgressUpdate] = []
        let outcome = try Installer.install(archive, options: InstallOptions(destination: bench.dest)) { updates.append($0) }
        guard case .completed(let result) = outcome else { throw HCPackError(.io, "rejected") }
        #expect(updates.first?.phase == "unpacking")
        let last = try #require(updates.last)
        #expect(last.phase == "installing")
        #expect(last.completedFiles == sampleFiles.count && last.totalFiles == sampleFiles.count)
        #expect(last.completedBytes == result.bytes && last.totalBytes == result.bytes)
    }

    @Test("A path under .hcpack/ is refused, by verify's rule: DEST/.hcpack holds hcpack's own records")
    func reservedFolder() throws {
        let bench = InstallBench()
        var package = PackageArchive()
        package.files.append((".hcpack/receipts/com.example.levels.json", Array("{}".utf8)))
        let archive = bench.archive(package)
        guard case .rejected(let report) = try bench.install(archive) else {
            Issue.record("the install went through")
            return
        }
        #expect(report.problems.rules.contains(.reservedName))
        #expect(try Verifier.verify(archive).problems.rules.contains(.reservedName))
        #expect(try FileManager.default.contentsOfDirectory(atPath: bench.dest).isEmpty)
    }

    @Test("A damaged receipt is refused; --force sets it aside, and its files are then not known to be hcpack's")
    func damagedReceipt() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive(files: [("a.txt", "one")]), name: "v1")
        try bench.installed(archive)
        bench.folder.write("dest/.hcpack/receipts/com.example.levels.json", "not json")
        let v2 = bench.archive(PackageArchive(version: "2", files: [("a.txt", "two")]), name: "v2")
        do {
            _ = try bench.install(v2)
            Issue.record("installed over a damaged receipt")
        } catch {
            #expect(error.message.contains("is not a record hcpack wrote (it is not a receipt"), "\(error.message)")
        }
        let result = try bench.installed(v2) { $0.force = true }
        #expect(result.previousVersion == nil)
        #expect(bench.read("a.txt") == Array("two".utf8))
    }

    @Test("A lock released a moment later (a forked child's copy of the descriptor, dropped at its exec) does not refuse the install")
    func lockReleasedMomentarily() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive())
        bench.folder.makeFolder("dest/.hcpack")
        let descriptor = open(bench.dest + "/.hcpack/lock", O_RDWR | O_CREAT, 0o644)
        try #require(descriptor >= 0)
        #expect(flock(descriptor, LOCK_EX) == 0)
        let releaser = Thread {
            usleep(200_000)
            close(descriptor)
        }
        releaser.start()
        #expect(try bench.installed(archive).status == .installed)
    }

    @Test("A held lock makes a second install fail with .locked, or wait")
    func locked() throws {
        let bench = InstallBench()
        let archive = bench.archive(PackageArchive())
        bench.folder.makeFolder("dest/.hcpack")
        let descriptor = open(bench.dest + "/.hcpack/lock", O_RDWR | O_CREAT, 0o644)
        #expect(descriptor >= 0)
        #expect(flock(descriptor, LOCK_EX) == 0)
        do {
            _ = try bench.install(archive)
            Issue.record("installed while locked")
        } catch {
            #expect(error.code == .locked)
            #expect(error.message.contains("another hcpack install is running in \(bench.dest)"))
        }
        #expect(bench.status("index.json") == nil)
        close(descriptor)
        #expect(try bench.installed(archive).status == .installed)
    }
}

func sha256Hex(_ text: String) -> String {
    Digest.Hasher.digest(.sha256, of: Array(text.utf8)).hexString
}

@Suite("install: folders moved in whole")
struct InstallWholeFolderTests {
    /// Every path under DEST except .hcpack, with its type and mode.
    static func tree(_ root: String) -> [String] {
        let items = FileManager.default.enumerator(atPath: root)?.compactMap { $0 as? String } ?? []
        return items.filter { !$0.hasPrefix(".hcpack") }.sorted().map { path in
            var info = stat()
            lstat(root + "/" + path, &info)
            return "\(path) \(String(info.st_mode & 0o170777, radix: 8))"
        }
    }

    @Test("A first install gives the same tree, modes and receipt whether folders move whole or file by file")
    func sameTreeEitherWay() throws {
        let files = sampleFiles + [("levels/deep/3.json", "{\"level\": 3}\n"), ("art/big/empty.txt", "")]
        let whole = InstallBench()
        let archive = whole.archive(PackageArchive(files: files))
        let result = try whole.installed(archive)
        #expect(result.installed == files.map(\.0).sorted())
        // DEST already holding the top folders (empty) places every file on its own.
        let single = InstallBench()
        single.folder.makeFolder("dest/levels")
        single.folder.makeFolder("dest/art")
        try single.installed(archive)
        #expect(Self.tree(whole.dest) == Self.tree(single.dest))
        #expect(Self.tree(whole.dest).contains("levels/deep 40755"))
        #expect(Self.tree(whole.dest).contains("levels/deep/3.json 100644"))
        #expect(whole.folder.read("dest/.hcpack/receipts/com.example.levels.json") == single.folder.read("dest/.hcpack/receipts/com.example.levels.json"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: whole.dest + "/.hcpack").sorted() == ["lock", "receipts"])
    }

    @Test("A staged folder holding a file Files does not list is placed file by file: the unlisted file stays out")
    func unlistedFileStaysOut() throws {
        let bench = InstallBench()
        var package = PackageArchive()
        package.listed = ["index.json", "levels/1.json", "art/Café.txt"]
        let result = try bench.installed(bench.archive(package))
        #expect(result.installed == ["art/Café.txt", "index.json", "levels/1.json"])
        #expect(bench.read("levels/1.json") != nil)
        #expect(bench.status("levels/2.json") == nil, "not listed, so not installed")
        let bytes = try #require(bench.folder.read("dest/.hcpack/receipts/com.example.levels.json"))
        let receipt = try #require(InstallReceipt.decode(bytes))
        #expect(receipt.files.map(\.path) == result.installed)
    }
}
