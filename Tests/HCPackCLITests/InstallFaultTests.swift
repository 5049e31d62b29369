import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// An upgrade from version 1 to version 2 that replaces, adds (in a new folder) and removes (emptying a folder)
/// files next to a user's file, on a tmpfs when root can mount one (fault runs then test hcpack, not the disk).
final class UpgradeBench {
    let folder = TemporaryFolder()
    let small: SmallFileSystem?
    let base: String
    let v1: String
    let v2: String
    /// The delta from version 1 to version 2 (`hcpack delta`): it carries all but keep.txt.
    let delta: String
    /// DEST with version 1 installed and the user's `mine.txt`.
    let withV1: String
    /// The tree of `withV1`, and of a clean upgrade of it.
    let oldListing: [String]
    let newListing: [String]
    /// Regular files (outside .hcpack) before and after a clean upgrade.
    let oldFiles: [String: Data]
    let newFiles: [String: Data]
    let binary = hcpackBinary()

    init() {
        small = SmallFileSystem(at: folder.url("fs"), size: "64m")
        base = small?.path ?? folder.url("fs")
        try? FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        v1 = PackageArchive(
            files: [("a.txt", "a 1\n"), ("keep.txt", "kept\n"), ("sub/b.txt", "b 1\n"), ("old/gone.txt", "gone in 2\n")]
        ).write(to: folder.url("v1.zip"))
        v2 = PackageArchive(
            version: "2",
            files: [("a.txt", "a 2\n"), ("keep.txt", "kept\n"), ("sub/b.txt", "b 2\n"), ("sub/c.txt", "c new\n"), ("new/d.txt", "d new\n")]
        ).write(to: folder.url("v2.zip"))
        delta = folder.url("v1-v2.zip")
        let made = run(binary, ["delta", v1, v2, "-o", delta])
        #expect(made.status == 0, "\(made.output)")
        withV1 = base + "/with-v1"
        try? FileManager.default.createDirectory(atPath: withV1, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: withV1 + "/mine.txt", contents: Data("user file\n".utf8))
        let first = run(binary, ["install", v1, "--dest", withV1])
        #expect(first.status == 0, "\(first.output)")
        let reference = base + "/reference"
        copyTree(withV1, to: reference)
        let upgrade = run(binary, ["install", v2, "--dest", reference])
        #expect(upgrade.status == 0, "\(upgrade.output)")
        oldListing = treeListing(withV1)
        newListing = treeListing(reference)
        oldFiles = regularFiles(withV1)
        newFiles = regularFiles(reference)
    }

    /// A fresh copy of DEST with version 1 installed.
    func destination(_ name: String) -> String {
        let path = base + "/" + name
        copyTree(withV1, to: path)
        return path
    }

    deinit { withExtendedLifetime(small) {} }
}

/// Names in `folder/.hcpack` (and its receipts folder) that only a failed or killed install leaves.
func leftovers(_ dest: String) -> [String] {
    let metadata = dest + "/.hcpack"
    let names =
        ((try? FileManager.default.contentsOfDirectory(atPath: metadata)) ?? [])
        + ((try? FileManager.default.contentsOfDirectory(atPath: metadata + "/receipts")) ?? []).map { "receipts/" + $0 }
    return names.filter { $0.hasPrefix("staging-") || $0.hasSuffix(".tmp") }.sorted()
}

func hasJournal(_ dest: String) -> Bool {
    ((try? FileManager.default.contentsOfDirectory(atPath: dest + "/.hcpack")) ?? []).contains { $0.hasPrefix("journal-") }
}

/// How often each of `syscalls` runs during `arguments`, from an strace log.
func syscallCounts(_ command: [String], syscalls: [String], log: String) -> [String: Int] {
    let traced = run("strace", ["-f", "-o", log, "-e", "trace=" + syscalls.joined(separator: ",")] + command)
    #expect(traced.status == 0, "\(traced.output)")
    var counts: [String: Int] = [:]
    let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
    for line in text.split(separator: "\n") {
        let call = line.drop { $0.isNumber || $0 == " " }
        guard let paren = call.firstIndex(of: "(") else { continue }
        let name = String(call[..<paren])
        if syscalls.contains(name) { counts[name, default: 0] += 1 }
    }
    return counts
}

/// The pid of `parent`'s first child (strace's tracee), once it exists.
func childProcess(of parent: Int32) -> Int32? {
    let text = (try? String(contentsOfFile: "/proc/\(parent)/task/\(parent)/children", encoding: .utf8)) ?? ""
    return text.split(separator: " ").first.flatMap { Int32($0) }
}

/// True when `pid` is stopped (by a signal or for its tracer).
func isStopped(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return false }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state == "t" || state == "T"
}

@Suite("hcpack install: I/O faults, kills and hostile destinations", .serialized)
struct InstallFaultTests {
    /// Mutating system calls: a kill injected at each one (it dies before the call runs) reaches every state
    /// DEST can be left in.
    static let mutating = ["write", "pwrite64", "mkdirat", "linkat", "renameat", "renameat2", "rename", "unlinkat"]
    static let syncing = ["fsync", "fdatasync", "syncfs"]

    @Test(
        "EIO, ENOSPC or SIGKILL at every write, link, rename, unlink and sync of an upgrade (full archive or delta): DEST ends entirely old or entirely new, or a rerun completes it",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment), arguments: [false, true]
    )
    func faultMatrix(throughDelta: Bool) throws {
        try Requirement.strace.require()
        let bench = UpgradeBench()
        let archive = throughDelta ? bench.delta : bench.v2
        let counts = syscallCounts(
            [bench.binary, "install", archive, "--dest", bench.destination("traced")], syscalls: Self.mutating + Self.syncing,
            log: bench.folder.url("trace.log"))
        // Journal, 4 files, the stale file moved aside, the receipt; 2 replaced files get a backup link.
        #expect((counts["renameat"] ?? 0) + (counts["renameat2"] ?? 0) >= 7, "\(counts)")
        #expect((counts["linkat"] ?? 0) >= 2, "\(counts)")
        #expect((counts["write"] ?? 0) >= 6, "\(counts)")

        var faults: [(syscall: String, fault: String, when: Int)] = []
        for (syscall, count) in counts.sorted(by: { $0.key < $1.key }) {
            for when in 1...count {
                faults.append((syscall, "error=EIO", when))
                if Self.mutating.contains(syscall) { faults.append((syscall, "signal=KILL", when)) }
                if syscall == "write" { faults.append((syscall, "error=ENOSPC", when)) }
            }
        }
        faults.append(("write", "error=EFBIG", 1))

        var undone = 0
        for (index, (syscall, fault, when)) in faults.enumerated() {
            let label = "\(syscall):\(fault):when=\(when)"
            let dest = bench.destination("run-\(index)")
            let child = ChildInstall(
                "/usr/bin/env",
                ["strace", "-f", "-o", "/dev/null", "-e", "inject=\(label)", bench.binary, "install", archive, "--dest", dest])
            try child.start()
            let outcome = child.finish()
            let files = regularFiles(dest)
            let entirelyOld = treeListing(dest) == bench.oldListing
            let entirelyNew = files == bench.newFiles

            if outcome.killed {
                #expect(fault == "signal=KILL" && diedOfSIGKILL(outcome), "\(label): hcpack crashed: \(outcome.stderr)")
                for (path, data) in files {
                    #expect(
                        data == bench.newFiles[path] || data == bench.oldFiles[path],
                        "\(label): \(path) holds \(data.count) bytes that are no version's")
                }
                // Without a journal no rename into DEST happened yet, or all of them did.
                if !hasJournal(dest) { #expect(files == bench.oldFiles || entirelyNew, "\(label)") }
            } else if outcome.status == 0 {
                #expect(entirelyNew, "\(label): exit 0 but DEST is not the new version")
                #expect(!hasJournal(dest), "\(label)")
            } else {
                #expect(outcome.status == 3, "\(label): \(outcome.stderr)")
                // strace counts each thread's calls apart: staged data is written on hcpack's second thread, so
                // "when=N" can fail a data write there and then the Nth write of the main thread, which is
                // the error message itself. Everything else below still holds.
                let messageLost = syscall == "write" && outcome.stderr.isEmpty
                #expect(messageLost || outcome.stderr.contains(dest), "\(label): the message names no path in DEST: \(outcome.stderr)")
                #expect(leftovers(dest).isEmpty, "\(label): \(leftovers(dest))")
                if hasJournal(dest) {
                    #expect(entirelyNew, "\(label): a journal is left only once the receipt is in place")
                } else {
                    #expect(entirelyOld || entirelyNew, "\(label): DEST is neither the old nor the new version")
                }
                if outcome.stderr.contains("is as it was before") {
                    #expect(entirelyOld, "\(label): the install says it was undone")
                    undone += 1
                }
            }
            // No stale lock (the rerun does not wait), leftovers removed, the clean upgrade's exact tree.
            let rerun = run(bench.binary, ["install", archive, "--dest", dest])
            #expect(rerun.status == 0, "\(label): rerun: \(rerun.output)")
            #expect(treeListing(dest) == bench.newListing, "\(label): the rerun ended elsewhere than a clean upgrade")
            try? FileManager.default.removeItem(atPath: dest)
        }
        // Failures between the journal and the receipt (links, renames, folder syncs, the receipt) were undone.
        #expect(undone >= 10, "\(undone) failures were undone")
    }

    @Test(
        "Where hard links are refused, replaced files are moved aside instead, and a failure still undoes the install",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func withoutHardLinks() throws {
        try Requirement.strace.require()
        let bench = UpgradeBench()
        let noLinks = ["-e", "inject=linkat:error=EPERM"]
        let plain = bench.destination("no-links")
        let log = bench.folder.url("renames.log")
        let traced = ["-f", "-o", log, "-e", "trace=renameat,renameat2,linkat"] + noLinks
        let upgraded = run("strace", traced + [bench.binary, "install", bench.v2, "--dest", plain])
        #expect(upgraded.status == 0, "\(upgraded.output)")
        #expect(treeListing(plain) == bench.newListing)
        // The receipt's rename is the last one: fail it, and every file moved aside must come back.
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        let renames = text.split(separator: "\n").filter { $0.contains("renameat(") }
        #expect(renames.count >= 8, "journal, 2 files moved aside, 3 placed, 1 stale moved aside, receipt: \(renames.count)")
        // new/ is absent from DEST, so it moves in whole; undoing moves it back.
        #expect(text.split(separator: "\n").filter { $0.contains("renameat2(") }.count == 1, "\(text)")
        let dest = bench.destination("no-links-failing")
        let failed = run(
            "strace",
            ["-f", "-o", "/dev/null"] + noLinks + ["-e", "inject=renameat:error=EIO:when=\(renames.count)"]
                + [bench.binary, "install", bench.v2, "--dest", dest])
        #expect(failed.status == 3, "\(failed.output)")
        #expect(failed.output.contains("receipts/com.example.levels.json: Input/output error (rename)"), "\(failed.output)")
        #expect(failed.output.contains("is as it was before"), "\(failed.output)")
        #expect(treeListing(dest) == bench.oldListing)
    }

    @Test(
        "A first install that fails at its receipt is undone entirely: not even .hcpack or its lock file is left",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func firstInstallUndone() throws {
        try Requirement.strace.require()
        let bench = UpgradeBench()
        let dest = bench.base + "/first"
        try FileManager.default.createDirectory(atPath: dest + "/sub", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dest + "/mine.txt", contents: Data("user file\n".utf8))
        let before = treeListing(dest)
        // Renames of a first install: the journal, a.txt, keep.txt and the 2 files in sub/ (which exists), the
        // receipt (6th); new/ is absent, so it is moved in whole with renameat2, and moved back when undoing.
        let scratch = bench.base + "/first-traced"
        copyTree(dest, to: scratch)
        let counts = syscallCounts(
            [bench.binary, "install", bench.v2, "--dest", scratch], syscalls: ["renameat", "renameat2"], log: bench.folder.url("first.log"))
        #expect(counts["renameat"] == 6 && counts["renameat2"] == 1, "\(counts)")
        let failed = run(
            "strace",
            [
                "-f", "-o", "/dev/null", "-e", "inject=renameat:error=EIO:when=\(counts["renameat"] ?? 0)", bench.binary, "install",
                bench.v2, "--dest", dest,
            ])
        #expect(failed.status == 3, "\(failed.output)")
        #expect(failed.output.contains("receipts/com.example.levels.json: Input/output error (rename)"), "\(failed.output)")
        #expect(failed.output.contains("is as it was before"), "\(failed.output)")
        #expect(treeListing(dest) == before, "the folders made for new files (new/) went too; sub/ stayed")
    }

    /// 600 new folders under all/ (which DEST already has: placed file by file, as a folder absent from DEST
    /// would move whole), on a tmpfs when root can mount one: thousands of mkdirs on a busy ext4 measure the
    /// disk, not hcpack. Returns the archive and the base folder for DEST.
    static func manyFoldersPackage(_ folder: TemporaryFolder) -> (archive: String, base: String, small: SmallFileSystem?) {
        let small = SmallFileSystem(at: folder.url("fs"), size: "64m")
        var package = PackageArchive()
        package.files = (0..<600).map { ("all/f\($0)/g/x.txt", Array("x".utf8)) }
        return (package.write(to: folder.url("folders.zip")), small?.path ?? folder.url("fs"), small)
    }

    static let limited = "ulimit -n 128; exec \"$@\""

    @Test(
        "The archive's mapping failing (ENOMEM) at any of its windows ends verify and install with exit 3 naming the system's error, not a damaged archive (exit 1), DEST untouched",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func archiveMappingFails() throws {
        try Requirement.strace.require()
        let folder = TemporaryFolder()
        // 5 MB of incompressible files: three 2 MiB windows (a read inside the current window maps nothing).
        var package = PackageArchive(files: [("a.txt", "alpha\n")])
        package.generated = ("data/", 5, 1_000_000, 2)
        let archive = package.write(to: folder.url("p.zip"))
        let binary = hcpackBinary()
        for command in [["verify", archive], ["install", archive, "--dest", folder.url("dest")]] {
            folder.makeFolder("dest")
            // The archive's windows are the main thread's shared, populated mappings (opening, then each read).
            let log = folder.url("mmap.log")
            #expect(run("strace", ["-f", "-o", log, "-e", "trace=mmap", binary] + command).status == 0)
            try? FileManager.default.removeItem(atPath: folder.url("dest"))
            let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            let main = try #require(lines.first?.split(separator: " ").first)
            let mapsOfMain = lines.filter { $0.split(separator: " ").first == main && $0.contains("mmap(") }
            let windows = mapsOfMain.indices.filter { mapsOfMain[$0].contains("MAP_SHARED|MAP_POPULATE") }.prefix(6)
            #expect(windows.count >= 2, "\(command[0]): \(windows)")
            for window in windows {
                // The main thread's count of other mappings (malloc's) before a window differs from run to run
                // on a loaded machine (a fresh Debian 12 missed it 8 times in a row at the same count): a run whose
                // injection met another mapping is run again at the counts around it (bounded).
                var hitWindow = false
                for shift in [0, 1, -1, 2, -2, 3, -3, 4, 0, 1, -1, 0] where !hitWindow && window + 1 + shift >= 1 {
                    folder.makeFolder("dest")
                    let injected = folder.url("inject.log")
                    let result = run(
                        "strace",
                        ["-f", "-o", injected, "-e", "trace=mmap", "-e", "inject=mmap:error=ENOMEM:when=\(window + 1 + shift)", binary] + command)
                    let log = (try? String(contentsOfFile: injected, encoding: .utf8)) ?? ""
                    hitWindow = log.split(separator: "\n").contains { $0.contains("(INJECTED)") && $0.contains("MAP_SHARED|MAP_POPULATE") }
                    if hitWindow {
                        #expect(result.status == 3, "\(command[0]), mmap \(window + 1): \(result.output)")
                        #expect(result.output.contains("Cannot allocate memory") && !result.output.contains("[archive."), "\(command[0]): \(result.output)")
                        #expect(treeListing(folder.url("dest")).isEmpty, "\(command[0])")
                    }
                    try? FileManager.default.removeItem(atPath: folder.url("dest"))
                }
                #expect(hitWindow, "\(command[0]): no run's injection met the archive's mapping \(window + 1)")
            }
        }
    }

    @Test(
        "A thread whose stack cannot be mapped at first (ENOMEM) is started again: build and install end, never hang holding DEST's lock",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func threadStartFails() throws {
        try Requirement.strace.require()
        let folder = TemporaryFolder()
        var package = PackageArchive()
        package.generated = ("data/", 40, 50_000, 1)
        let archive = package.write(to: folder.url("p.zip"))
        folder.write("src/ContentInfo.plist", plistXML("<key>IAPProductIdentifier</key><string>com.example.threads</string><key>ContentVersion</key><string>1</string>"))
        folder.write("src/Contents/a.bin", [UInt8](repeating: 7, count: 300_000))
        let binary = hcpackBinary()
        for command in [["install", archive, "--dest", folder.url("dest")], ["build", folder.url("src"), "-o", folder.url("out.zip"), "--force"]] {
            folder.makeFolder("dest")
            let log = folder.url("mmap.log")
            #expect(run("strace", ["-f", "-o", log, "-e", "trace=mmap", binary] + command).status == 0)
            let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            let main = try #require(lines.first?.split(separator: " ").first)
            let mapsOfMain = lines.filter { $0.split(separator: " ").first == main && $0.contains("mmap(") }
            let stacks = mapsOfMain.indices.filter { mapsOfMain[$0].contains("MAP_STACK") }
            #expect(!stacks.isEmpty, "\(command[0]) started no thread")
            for stack in stacks.prefix(3) {
                try? FileManager.default.removeItem(atPath: folder.url("dest"))
                folder.makeFolder("dest")
                // A bounded run: before, the thread's waiters waited forever (SIGKILL reaches strace and hcpack alike).
                let result = run("timeout", ["-s", "KILL", "20", "strace", "-f", "-o", "/dev/null", "-e", "inject=mmap:error=ENOMEM:when=\(stack + 1)", binary] + command)
                #expect(result.status == 0, "\(command[0]), mmap \(stack + 1): \(result.output)")
            }
            #expect(hcpack(["verify", command[0] == "install" ? archive : folder.url("out.zip")]).status == 0)
            try? FileManager.default.removeItem(atPath: folder.url("dest"))
        }
    }

    @Test(
        "Under a thread limit (prlimit --nproc, run as nobody) install ends at once with exit 3, saying it could not start a thread, DEST's files untouched",
        .enabled(if: Requirement.otherUser.enabled, Requirement.otherUser.comment))
    func threadLimit() throws {
        try Requirement.otherUser.require()
        let folder = TemporaryFolder()
        // 2 MB: over HashPipeline.inlineBytes, so the install hashes and writes on threads of its own (a smaller
        // archive is read on the main thread alone, and installs under any thread limit).
        var package = PackageArchive()
        package.generated = ("data/", 40, 50_000, 1)
        let archive = package.write(to: folder.url("p.zip"))
        // A copy nobody can run and read, in a folder nobody can write.
        let binary = folder.url("hcpack")
        try FileManager.default.copyItem(atPath: hcpackBinary(), toPath: binary)
        for limit in 1...4 {
            let dest = folder.url("dest-\(limit)")
            folder.makeFolder("dest-\(limit)")
            #expect(run("chmod", ["-R", "a+rwX", folder.path]).status == 0)
            let result = run(
                "timeout", ["-s", "KILL", "60", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "prlimit", "--nproc=\(limit)", binary, "install", archive, "--dest", dest])
            #expect(result.status == 3, "--nproc=\(limit): \(result.output)")
            #expect(result.output.contains("could not start a thread"), "--nproc=\(limit): \(result.output)")
            #expect(regularFiles(dest).isEmpty, "--nproc=\(limit)")
        }
    }

    @Test("600 new folders under `ulimit -n 128`: installed without running out of descriptors")
    func manyFolders() throws {
        let folder = TemporaryFolder()
        let (archive, base, small) = Self.manyFoldersPackage(folder)
        defer { withExtendedLifetime(small) {} }
        let dest = base + "/dest"
        try FileManager.default.createDirectory(atPath: dest + "/all", withIntermediateDirectories: true)
        let installed = run("/bin/bash", ["-c", Self.limited, "bash", hcpackBinary(), "install", archive, "--dest", dest])
        #expect(installed.status == 0, "\(installed.output)")
        #expect(FileManager.default.contents(atPath: dest + "/all/f599/g/x.txt") == Data("x".utf8))
    }

    @Test(
        "600 new folders under `ulimit -n 128`, the receipt's rename failing: all 1,200 folders are removed again",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func manyFoldersUndone() throws {
        try Requirement.strace.require()
        let folder = TemporaryFolder()
        let (archive, base, small) = Self.manyFoldersPackage(folder)
        defer { withExtendedLifetime(small) {} }
        let undone = base + "/undone"
        try FileManager.default.createDirectory(atPath: undone + "/all", withIntermediateDirectories: true)
        let before = treeListing(undone)
        // The receipt's rename (journal, 600 files, receipt) fails.
        let inject = ["strace", "-f", "-o", "/dev/null", "-e", "inject=renameat:error=EIO:when=602"]
        let failed = run("/bin/bash", ["-c", Self.limited, "bash"] + inject + [hcpackBinary(), "install", archive, "--dest", undone])
        #expect(failed.status == 3, "\(failed.output)")
        #expect(failed.output.contains("is as it was before"), "\(failed.output)")
        #expect(treeListing(undone) == before)
    }

    @Test(
        "A folder swapped for a symlink to an outside folder during the install: nothing lands outside DEST",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func symlinkSwap() throws {
        try Requirement.strace.require()
        let bench = UpgradeBench()
        // Stopped (SIGSTOP injected) right after the journal's rename, before any folder of DEST is opened; then
        // right after the rename of sub/b.txt (renames: journal, a.txt, new/d.txt, sub/b.txt), holding sub open.
        for (round, when) in [(0, 1), (1, 4)] {
            let dest = bench.destination("swap-\(round)")
            let outside = bench.base + "/outside-\(round)"
            try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
            // strace logs the group stop: a state ptrace's brief stops at every system call never reach.
            let log = bench.folder.url("swap-\(round).log")
            let child = ChildInstall(
                "/usr/bin/env",
                [
                    "strace", "-f", "-o", log, "-e", "trace=renameat", "-e", "inject=renameat:signal=STOP:when=\(when)",
                    bench.binary, "install", bench.v2, "--dest", dest,
                ])
            try child.start()
            var tracee: Int32?
            let deadline = Date().addingTimeInterval(300)  // a watchdog: the stop comes within milliseconds
            while Date() < deadline {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                if text.contains("stopped by SIGSTOP"), let pid = childProcess(of: child.process.processIdentifier) {
                    tracee = pid
                    break
                }
                usleep(10_000)
            }
            let pid = try #require(tracee, "round \(round): hcpack never stopped")
            #expect(isStopped(pid))
            #expect(hasJournal(dest), "stopped after the journal was written")
            // The attacker: DEST/sub moves aside and a symlink to the outside folder takes its place.
            try FileManager.default.moveItem(atPath: dest + "/sub", toPath: dest + "/sub.moved")
            try FileManager.default.createSymbolicLink(atPath: dest + "/sub", withDestinationPath: outside)
            kill(pid, SIGCONT)
            let outcome = child.finish()
            #expect(!outcome.killed)
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty, "round \(round): a file landed outside")
            // Placing stops at the symlink (round 0: opening sub; round 1: syncing the folders it changed, sub
            // among them). Round 0 is undone. In round 1 two files went into sub through the descriptor hcpack
            // held, and undoing them would mean following the symlink: they stay, with the journal.
            #expect(outcome.status == 3, "round \(round): \(outcome.stderr)")
            #expect(outcome.stderr.contains("\(dest)/sub is not a folder"), "\(outcome.stderr)")
            #expect(FileManager.default.contents(atPath: dest + "/a.txt") == Data("a 1\n".utf8), "round \(round)")
            #expect(!FileManager.default.fileExists(atPath: dest + "/new"), "round \(round)")
            if round == 0 {
                #expect(outcome.stderr.contains("is as it was before"), "\(outcome.stderr)")
                #expect(FileManager.default.contents(atPath: dest + "/sub.moved/b.txt") == Data("b 1\n".utf8))
                #expect(!hasJournal(dest))
            } else {
                #expect(outcome.stderr.contains("run the install again"), "\(outcome.stderr)")
                #expect(FileManager.default.contents(atPath: dest + "/sub.moved/b.txt") == Data("b 2\n".utf8))
                #expect(FileManager.default.contents(atPath: dest + "/sub.moved/c.txt") == Data("c new\n".utf8))
                #expect(hasJournal(dest))
            }
            // A symlink where a folder must be blocks every later install, and still nothing goes through it.
            let rerun = run(bench.binary, ["install", bench.v2, "--dest", dest, "--force"])
            #expect(rerun.status == 1, "\(rerun.output)")
            #expect(rerun.output.contains("\(dest)/sub is not a folder"), "\(rerun.output)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
            // With the folder back in place, a rerun completes the upgrade.
            try FileManager.default.removeItem(atPath: dest + "/sub")
            try FileManager.default.moveItem(atPath: dest + "/sub.moved", toPath: dest + "/sub")
            let repaired = run(bench.binary, ["install", bench.v2, "--dest", dest])
            #expect(repaired.status == 0, "\(repaired.output)")
            #expect(treeListing(dest) == bench.newListing, "round \(round)")
        }
    }

    @Test("DEST a file or a symlink to a folder: exit 3 naming it, nothing written anywhere")
    func destinationNotAFolder() throws {
        let folder = TemporaryFolder()
        let archive = PackageArchive().write(to: folder.url("p.zip"))
        folder.write("file", "not a folder")
        let asFile = hcpack(["install", archive, "--dest", folder.url("file")])
        #expect(asFile.status == 3)
        #expect(asFile.stderr.contains("\(folder.url("file")) is a regular file, not a folder"), "\(asFile.stderr)")
        #expect(folder.read("file") == Array("not a folder".utf8))

        folder.makeFolder("real")
        try FileManager.default.createSymbolicLink(atPath: folder.url("link"), withDestinationPath: folder.url("real"))
        let asLink = hcpack(["install", archive, "--dest", folder.url("link")])
        #expect(asLink.status == 3)
        #expect(asLink.stderr.contains("\(folder.url("link")) is a symlink"), "\(asLink.stderr)")
        #expect(treeListing(folder.url("real")).isEmpty)
        // A symlink to a folder as a parent of DEST is the caller's own choice, and works.
        folder.makeFolder("real/dest")
        #expect(hcpack(["install", archive, "--dest", folder.url("link/dest")]).status == 0)
        #expect(folder.read("real/dest/index.json") != nil)
    }

    @Test(
        "An immutable DEST (chattr +i, which stops even root): exit 3 naming DEST, which stays as it was",
        .enabled(if: Requirement.immutable.enabled, Requirement.immutable.comment))
    func immutableDestination() throws {
        try Requirement.immutable.require()
        let folder = TemporaryFolder()
        let v1 = PackageArchive().write(to: folder.url("v1.zip"))
        // Permission bits do not stop root: an immutable folder stops everyone.
        folder.write("immutable/mine.txt", "user file\n")
        let dest = folder.url("immutable")
        try #require(run("chattr", ["+i", dest]).status == 0)
        defer { run("chattr", ["-i", dest]) }
        let before = treeListing(dest)
        let result = run(hcpackBinary(), ["install", v1, "--dest", dest])
        #expect(result.status == 3, "\(result.output)")
        #expect(result.output.contains("\(dest)/.hcpack: Operation not permitted"), "\(result.output)")
        #expect(treeListing(dest) == before)
    }

    @Test(
        "A DEST on a file system remounted read-only: exit 3 naming DEST, which stays as it was",
        .enabled(if: Requirement.mount.enabled, Requirement.mount.comment))
    func readOnlyDestination() throws {
        try Requirement.mount.require()
        let folder = TemporaryFolder()
        let v1 = PackageArchive().write(to: folder.url("v1.zip"))
        let v2 = PackageArchive(version: "2", files: [("index.json", "{}\n")]).write(to: folder.url("v2.zip"))
        let binary = hcpackBinary()
        // A tmpfs holding an installed version 1, remounted read-only.
        let small = try #require(SmallFileSystem(at: folder.url("mount"), size: "8m"))
        let dest = small.path + "/dest"
        folder.write("mount/dest/mine.txt", "user file\n")
        #expect(run(binary, ["install", v1, "--dest", dest]).status == 0)
        let before = treeListing(dest)
        try #require(run("mount", ["-o", "remount,ro", small.path]).status == 0)
        let result = run(binary, ["install", v2, "--dest", dest])
        #expect(result.status == 3, "\(result.output)")
        #expect(result.output.contains("\(dest)/.hcpack/lock: Read-only file system"), "\(result.output)")
        #expect(treeListing(dest) == before)
        #expect(run("mount", ["-o", "remount,rw", small.path]).status == 0)
        #expect(run(binary, ["install", v2, "--dest", dest]).status == 0, "works once writable again")
    }

    @Test(
        "DEST on another file system than the archive (tmpfs): staging goes inside DEST, so renames never copy",
        .enabled(if: Requirement.mount.enabled, Requirement.mount.comment),
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func destinationOnOtherFileSystem() throws {
        try Requirement.mount.require()
        try Requirement.strace.require()
        let folder = TemporaryFolder()
        let small = try #require(SmallFileSystem(at: folder.url("mount"), size: "16m"))
        let v1 = PackageArchive().write(to: folder.url("v1.zip"))
        let v2 = PackageArchive(version: "2", files: [("index.json", "{}\n"), ("more/x.txt", "x")]).write(
            to: folder.url("v2.zip"))
        let dest = small.path + "/dest"
        folder.makeFolder("mount/dest")
        var archiveInfo = stat()
        var destInfo = stat()
        #expect(stat(v1, &archiveInfo) == 0 && stat(dest, &destInfo) == 0)
        #expect(archiveInfo.st_dev != destInfo.st_dev, "the archive and DEST are on different file systems")
        let binary = hcpackBinary()
        // renameat across file systems fails (EXDEV): any staging outside DEST would show as exit 3.
        let strace = ["strace", "-f", "-o", folder.url("renames.log"), "-e", "trace=renameat,renameat2,rename"]
        let first = run("/usr/bin/env", strace + [binary, "install", v1, "--dest", dest])
        #expect(first.status == 0, "\(first.output)")
        let log = (try? String(contentsOfFile: folder.url("renames.log"), encoding: .utf8)) ?? ""
        #expect(!log.contains("EXDEV") && log.contains("renameat("), "\(log)")
        for (path, text) in sampleFiles { #expect(FileManager.default.contents(atPath: dest + "/" + path) == Data(text.utf8)) }
        #expect(run(binary, ["install", v2, "--dest", dest]).status == 0)
        #expect(FileManager.default.contents(atPath: dest + "/more/x.txt") == Data("x".utf8))
        #expect(!FileManager.default.fileExists(atPath: dest + "/levels"), "the emptied folder went with its files")
    }

    @Test(
        "Hard links refused, then the rename into place failing: the file moved aside goes back, DEST byte for byte as before",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func movedAsideThenRenameFails() throws {
        try Requirement.strace.require()
        let bench = UpgradeBench()
        let noLinks = ["-e", "inject=linkat:error=EPERM"]
        let log = bench.folder.url("aside.log")
        let traced = run(
            "strace", ["-f", "-o", log, "-e", "trace=renameat,linkat"] + noLinks + [bench.binary, "install", bench.v2, "--dest", bench.destination("aside-traced")])
        #expect(traced.status == 0, "\(traced.output)")
        // The renameat that puts the new a.txt in place, right after the old one was moved aside.
        let renames = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.contains("renameat(") }
        let placing = try #require(renames.firstIndex { $0.range(of: #"renameat\(\d+, "a\.txt", \d+, "a\.txt"\)"#, options: .regularExpression) != nil })
        let dest = bench.destination("aside-failing")
        let failed = run(
            "strace",
            ["-f", "-o", "/dev/null"] + noLinks + ["-e", "inject=renameat:error=EIO:when=\(placing + 1)"]
                + [bench.binary, "install", bench.v2, "--dest", dest])
        #expect(failed.status == 3, "\(failed.output)")
        #expect(failed.output.contains("a.txt: Input/output error (rename)"), "\(failed.output)")
        #expect(failed.output.contains("is as it was before"), "\(failed.output)")
        #expect(treeListing(dest) == bench.oldListing)
        #expect(regularFiles(dest) == bench.oldFiles, "a replaced file was lost")
    }

    @Test("A 30,000-deep folder planted as a staging leftover is removed under `ulimit -n 64`, and the install goes through")
    func deepStagingLeftover() throws {
        let folder = TemporaryFolder()
        // On a tmpfs when root can mount one: removing 30,000 folders on this ext4 takes 20 s (`rm -rf` too).
        let small = SmallFileSystem(at: folder.url("fs"), size: "64m")
        defer { withExtendedLifetime(small) {} }
        let dest = (small?.path ?? folder.url("fs")) + "/dest"
        try FileManager.default.createDirectory(atPath: dest + "/.hcpack/staging-planted", withIntermediateDirectories: true)
        // Made with openat/mkdirat: the full path is far past PATH_MAX.
        var current = open(dest + "/.hcpack/staging-planted", O_RDONLY | O_DIRECTORY)
        for _ in 0..<30_000 {
            #expect(mkdirat(current, "d", 0o755) == 0)
            let next = openat(current, "d", O_RDONLY | O_DIRECTORY)
            close(current)
            current = next
        }
        close(openat(current, "leaf.txt", O_WRONLY | O_CREAT, 0o644))
        close(current)
        let archive = PackageArchive().write(to: folder.url("p.zip"))
        let installed = run("/bin/bash", ["-c", "ulimit -n 64; exec \"$@\"", "bash", hcpackBinary(), "install", archive, "--dest", dest])
        #expect(installed.status == 0, "\(installed.output.prefix(2000))")
        #expect(installed.output.utf8.count < 4096, "a short message")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: dest + "/.hcpack")) ?? []
        #expect(!left.contains("staging-planted"), "\(left)")
    }

}
