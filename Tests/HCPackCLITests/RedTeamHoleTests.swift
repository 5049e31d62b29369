import Foundation
import HostedContent
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The holes an outside black-box review of the binary found (red team, findings 01-08), one test or more each.
@Suite("install, verify and sign hold against the red team's findings", .serialized)
struct RedTeamHoleTests {
    static let receipt = "dest/.hcpack/receipts/com.example.levels.json"

    /// Eight files: more than the --max-entries the tests pass.
    static let manyFiles = (1...8).map { ("f\($0).txt", "file \($0)\n") }

    /// Adds a '../x' entry to the receipt at `path` under `bench`: a record hcpack would never write.
    static func plantBadEntry(_ bench: SigningBench, _ path: String = receipt) throws {
        let bytes = try #require(bench.folder.read(path))
        var receipt = try #require(InstallReceipt.decode(bytes))
        receipt.files.append(InstalledFile(path: "../x", size: 1, sha256: String(repeating: "0", count: 64)))
        bench.folder.write(path, receipt.encoded())
    }

    @Test("01: --trusted-key --force never rolls back past a receipt it cannot read, nor one a low --max-entries hides")
    func forceRollbackThroughUnusableReceipt() throws {
        let bench = SigningBench()
        PackageArchive(version: "2.0", files: Self.manyFiles).write(to: bench.archive)
        let key = bench.key("a")
        #expect(bench.sign(key).status == 0)
        let trust = ["--trusted-key", bench.pub("a")]
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest] + trust).status == 0)
        PackageArchive(version: "1.0", files: [("a.txt", "old\n")]).write(to: bench.archive)
        #expect(bench.sign(key, ["--force"]).status == 0)
        let before = treeListing(bench.dest)
        // hcpack's own, honest receipt of eight files stays usable under --max-entries 5: the downgrade is refused.
        let limited = hcpack(["install", bench.archive, "--dest", bench.dest, "--force", "--max-entries", "5"] + trust)
        #expect(limited.status == 1 && limited.stderr.contains("never downgrades"), "\(limited.stderr)")
        #expect(treeListing(bench.dest) == before)
        // A receipt hcpack did not write: --force does not set it aside under --trusted-key.
        try Self.plantBadEntry(bench)
        let planted = treeListing(bench.dest)
        let forced = hcpack(["install", bench.archive, "--dest", bench.dest, "--force"] + trust)
        #expect(forced.status == 1 && forced.stderr.contains("remove the file by hand"), "\(forced.stderr)")
        #expect(forced.stderr.contains("receipts/com.example.levels.json"), "\(forced.stderr)")
        #expect(treeListing(bench.dest) == planted)
        // Without trusted keys --force still sets it aside (the install a user asked for).
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest, "--force"]).status == 0)
    }

    @Test("01: a --max-entries below a receipt's file count leaves hcpack's receipt usable (no --force needed)")
    func maxEntriesKeepsReceiptUsable() throws {
        let bench = SigningBench()
        PackageArchive(version: "1.0", files: Self.manyFiles).write(to: bench.archive)
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest]).status == 0)
        PackageArchive(version: "1.1", files: [("a.txt", "one\n")]).write(to: bench.archive)
        let result = hcpack(["install", bench.archive, "--dest", bench.dest, "--max-entries", "5"])
        #expect(result.status == 0, "\(result.stderr)")
        // The receipt was read: the eight files of 1.0 were removed as stale.
        #expect(!FileManager.default.fileExists(atPath: bench.folder.url("dest/f1.txt")))
    }

    @Test("04: another product's unusable receipt stops an install, with or without --force, signed or not", arguments: [false, true])
    func forceOverOtherProductsUnusableReceipt(signed: Bool) throws {
        let bench = SigningBench()
        PackageArchive(version: "1.0", files: [("a.txt", "A owns this\n")] + Self.manyFiles).write(to: bench.archive)
        let key = bench.key("a")
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest]).status == 0)
        var other = PackageArchive(version: "1.0", files: [("a.txt", "B overwrites\n")])
        other.product = "com.example.other"
        let otherArchive = bench.folder.url("other.zip")
        other.write(to: otherArchive)
        var trust: [String] = []
        if signed {
            #expect(hcpack(["sign", otherArchive, "--key", key]).status == 0)
            trust = ["--trusted-key", bench.pub("a")]
        }
        let before = treeListing(bench.dest)
        let limited = hcpack(["install", otherArchive, "--dest", bench.dest, "--force", "--max-entries", "5"] + trust)
        #expect(limited.status == 1 && limited.stderr.contains("belongs to 'com.example.levels'"), "\(limited.stderr)")
        #expect(treeListing(bench.dest) == before)
        try Self.plantBadEntry(bench)
        let planted = treeListing(bench.dest)
        for force in [[], ["--force"]] {
            let result = hcpack(["install", otherArchive, "--dest", bench.dest] + force + trust)
            #expect(result.status == 1 && result.stderr.contains("receipts/com.example.levels.json"), "\(result.stderr)")
        }
        #expect(treeListing(bench.dest) == planted)
        #expect(bench.folder.read("dest/a.txt") == Array("A owns this\n".utf8))
    }

    @Test("02: a key line with trailing white space is that key, even when a planted file has that name", arguments: ["\n", "\r", " ", "\r\n"])
    func keyLineWithTrailingWhiteSpace(suffix: String) throws {
        let bench = SigningBench()
        bench.key("a")
        let b = bench.key("b")
        #expect(bench.sign(b).status == 0)
        let lineA = String(decoding: bench.folder.read("a.pem.pub") ?? [], as: UTF8.self).trimmingCharacters(in: .newlines)
        let value = lineA + suffix
        // The attacker's file, named as the value (its '/' make folders), holds key B.
        let work = bench.folder.url("work")
        let planted = work + "/" + value
        try FileManager.default.createDirectory(
            atPath: (planted as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: planted, contents: Data((bench.folder.read("b.pem.pub") ?? []))))
        #expect(try VerifierKey.load(value, relativeTo: work).map(\.line) == [lineA])
        let verify = hcpack(["verify", bench.archive, "--trusted-key", value], in: work)
        #expect(verify.status == 1 && verify.stdout.contains("[signature.untrusted]"), "\(verify.stdout)\(verify.stderr)")
        // Without a planted file the value is still the key (it used to be a usage error).
        try FileManager.default.removeItem(atPath: planted)
        #expect(hcpack(["verify", bench.archive, "--trusted-key", value], in: work).status == 1)
        #expect(hcpack(["verify", bench.archive, "--trusted-key", bench.pub("b")]).status == 0)
    }

    @Test("08: a fifo as archive, key or note is refused at once, naming it (it used to block forever)")
    func fifoInputsRefused() throws {
        let bench = SigningBench()
        #expect(bench.sign(bench.key("a")).status == 0)
        bench.folder.write("catalog.json", "{}")
        for name in ["fifo.zip", "fifo.pub", "fifo.hcsig"] {
            try #require(mkfifo(bench.folder.url(name), 0o600) == 0)
        }
        bench.folder.makeFolder("dest2")
        let fifo = bench.folder.url("fifo.zip"), key = bench.folder.url("fifo.pub")
        let runs: [[String]] = [
            ["verify", fifo], ["install", fifo, "--dest", bench.folder.url("dest2")],
            ["verify", bench.archive, "--trusted-key", key],
            ["install", bench.archive, "--dest", bench.dest, "--trusted-key", key],
            ["verify", bench.archive, "--trusted-key", bench.pub("a"), "--signature", bench.folder.url("fifo.hcsig")],
            ["verify-catalog", bench.folder.url("catalog.json"), "--trusted-key", key],
        ]
        for arguments in runs {
            // The binary under timeout(1): a command that blocks is killed (124) instead of stopping the suite. An
            // archive fifo waits for a writer as long as the watchdog allows (2 s here), a key or note not at all.
            let result = run("/usr/bin/env", ["HCPACK_STALL_SECONDS=2", "timeout", "120", hcpackBinary()] + arguments)
            #expect(result.status != 124 && result.status != 0, "\(arguments): \(result.output)")
            #expect(result.output.contains("fifo"), "\(arguments): \(result.output)")
        }
    }

    @Test("07: without Files, a file with no integrity record is refused by sign, verify and install --trusted-key")
    func unrecordedFileWithoutFiles() throws {
        let bench = SigningBench()
        var package = PackageArchive(version: "1.0")
        package.filesKey = false
        package.recordsWithoutFiles = true
        package.listed = package.files.map(\.0)  // records for these; .git/config below has none
        package.files.append((".git/config", Array("unrecorded\n".utf8)))
        package.write(to: bench.archive)
        let key = bench.key("a")
        let sign = bench.sign(key)
        #expect(sign.status == 1 && sign.stdout.contains("[signature.unsigned-file]"), "\(sign.stdout)\(sign.stderr)")
        #expect(sign.stdout.contains("Contents/.git/config"), "\(sign.stdout)")
        #expect(!FileManager.default.fileExists(atPath: bench.note))
        // A note made anyway (by an older hcpack): verify and install refuse the unrecorded file alike.
        bench.writeNote(try bench.craftedNote(key) { _ in })
        let verify = hcpack(["verify", bench.archive, "--trusted-key", bench.pub("a")])
        #expect(verify.status == 1 && verify.stdout.contains("[signature.unsigned-file]"), "\(verify.stdout)")
        let before = treeListing(bench.dest)
        let install = hcpack(["install", bench.archive, "--dest", bench.dest, "--trusted-key", bench.pub("a")])
        #expect(install.status == 1 && install.stdout.contains("[signature.unsigned-file]"), "\(install.stdout)\(install.stderr)")
        #expect(treeListing(bench.dest) == before)
    }

    @Test("06: temporary records a kill left before their rename are removed by the next install, the no-op one too")
    func staleTemporaryRecordsRemoved() throws {
        let bench = SigningBench()
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest]).status == 0)
        bench.folder.write("dest/.hcpack/journal-com.example.levels.json.tmp", "{\"half\": ")
        bench.folder.write("dest/.hcpack/receipts/com.example.levels.json.tmp", "{")
        let rerun = hcpack(["install", bench.archive, "--dest", bench.dest, "--json"])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(jsonObject(rerun.stdout)?["status"] as? String == "unchanged", "\(rerun.stdout)")
        for path in ["dest/.hcpack/journal-com.example.levels.json.tmp", "dest/.hcpack/receipts/com.example.levels.json.tmp"] {
            #expect(!FileManager.default.fileExists(atPath: bench.folder.url(path)), "\(path) left")
        }
    }

    @Test(
        "09: .hcpack in any case (.HCPACK, a KELVIN SIGN k) is the records' folder: verify reports content.reserved-name, install refuses",
        arguments: [".HCPACK", ".hcpac\u{212A}", ".HcPack"])
    func reservedNameInAnyCase(folderName: String) throws {
        #expect(Installer.isMetadataFolder(Substring(folderName)))
        #expect(!Installer.isMetadataFolder(".hcpacks") && !Installer.isMetadataFolder("hcpack"))
        let bench = SigningBench()
        let archive = PackageArchive(files: [("a.txt", "a\n"), (folderName + "/receipts/com.example.other.json", "{}\n")])
            .write(to: bench.folder.url("p.zip"))
        let verify = hcpack(["verify", archive])
        #expect(verify.status == 1 && verify.stdout.contains("[content.reserved-name]"), "\(verify.stdout)")
        let before = treeListing(bench.dest)
        #expect(hcpack(["install", archive, "--dest", bench.dest, "--force"]).status == 1)
        #expect(treeListing(bench.dest) == before)
    }

    @Test(
        "05: when removing the staging folder fails after the receipt, the install exits 0 with a warning naming what is left",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func stagingLeftAfterReceiptIsReported() throws {
        let bench = SigningBench()
        PackageArchive(files: [("a/b/c.txt", "c\n"), ("d.txt", "d\n")]).write(to: bench.archive)
        // From the Nth unlinkat on every one fails: some N hit only the staging folder's, after the receipt.
        var reported = 0
        for when in 1...12 {
            try? FileManager.default.removeItem(atPath: bench.dest)
            bench.folder.makeFolder("dest")
            let result = run(
                "/usr/bin/env",
                ["strace", "-f", "-o", "/dev/null", "-e", "inject=unlinkat:error=EIO:when=\(when)+", hcpackBinary(), "install", bench.archive,
                 "--dest", bench.dest, "-q"])
            let left = ((try? FileManager.default.contentsOfDirectory(atPath: bench.dest + "/.hcpack")) ?? []).filter { $0.hasPrefix("staging-") }
            guard result.status == 0, !left.isEmpty else { continue }
            reported += 1
            #expect(result.output.contains("warning: installed, but the staging folder was not removed"), "\(when): \(result.output)")
            #expect(left.contains { result.output.contains($0) }, "\(when): \(left): \(result.output)")
            #expect(bench.folder.read("dest/d.txt") == Array("d\n".utf8))
        }
        #expect(reported > 0, "no run failed only in the staging folder's removal")
        // The next install removes it.
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest]).status == 0)
        let after = try FileManager.default.contentsOfDirectory(atPath: bench.dest + "/.hcpack")
        #expect(!after.contains { $0.hasPrefix("staging-") }, "\(after)")
    }

    @Test("03: an unknown co-signer whose name holds DEL (0x7f) is ignored, as Go's note.Open does; below 0x20 still refused")
    func delInUnknownSignerName() throws {
        let bench = SigningBench()
        #expect(bench.sign(bench.key("a")).status == 0)
        let signed = try #require(bench.folder.read("rel.zip.hcsig"))
        let coSigner = Array("\u{2014} ex\u{7f}x ESIzRFVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVQ==\n".utf8)
        bench.writeNote(signed + coSigner)
        let note = try SignedNote.parse(signed + coSigner)
        #expect(note.signatures.count == 2 && note.signatures.last?.name == "ex\u{7f}x")
        let verify = hcpack(["verify", bench.archive, "--trusted-key", bench.pub("a")])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        // A control character below 0x20 is what Go refuses, and so do we.
        var tab = coSigner
        tab[tab.firstIndex(of: 0x7f) ?? 0] = 0x09
        #expect(throws: NoteFormatError.self) { try SignedNote.parse(signed + tab) }
    }
}
