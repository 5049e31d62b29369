import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Runs the built hcpack binary in a child process, its output discarded or captured.
final class ChildInstall {
    let process = Process()
    private let errorPipe = Pipe()
    private let outputPipe = Pipe()

    init(_ executable: String, _ arguments: [String]) {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = outputPipe
        process.standardError = errorPipe
    }

    func start() throws { try process.run() }

    /// Whether the child is running `binary` now: its /proc entry names that executable (not yet exec'd, or
    /// already exited, it does not).
    func isRunning(_ binary: String) -> Bool {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(process.processIdentifier)/exe")) ?? ""
        return !exe.isEmpty && exe == URL(fileURLWithPath: binary).resolvingSymlinksInPath().path
    }

    /// Waits and returns the exit status (or the signal), with stdout and stderr.
    func finish() -> (status: Int32, killed: Bool, stdout: String, stderr: String) {
        let out = outputPipe.fileHandleForReading.readDataToEndOfFile()
        let err = errorPipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (
            process.terminationStatus, process.terminationReason == .uncaughtSignal, String(decoding: out, as: UTF8.self),
            String(decoding: err, as: UTF8.self)
        )
    }
}

/// Whether a finished child ended by SIGKILL (strace ends itself with its tracee's signal), not by an exit.
func diedOfSIGKILL(_ outcome: (status: Int32, killed: Bool, stdout: String, stderr: String)) -> Bool {
    outcome.killed && outcome.status == SIGKILL
}

/// Mounts a small tmpfs (root only); nil when that is not possible here.
final class SmallFileSystem {
    let path: String

    init?(at path: String, size: String) {
        guard getuid() == 0,
            FileManager.default.isExecutableFile(atPath: "/bin/mount")
                || FileManager.default.isExecutableFile(atPath: "/usr/bin/mount")
        else {
            return nil
        }
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard run("mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", path]).status == 0 else { return nil }
        self.path = path
    }

    deinit { run("umount", [path]) }
}

/// The regular files under `root` (hcpack's own folder aside), by relative path.
func regularFiles(_ root: String) -> [String: Data] {
    var result: [String: Data] = [:]
    guard let enumerator = FileManager.default.enumerator(atPath: root) else { return result }
    while let path = enumerator.nextObject() as? String {
        if path == ".hcpack" {
            enumerator.skipDescendants()
            continue
        }
        var info = stat()
        guard lstat(root + "/" + path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
        result[path] = FileManager.default.contents(atPath: root + "/" + path)
    }
    return result
}

func copyTree(_ source: String, to target: String) {
    let result = run("cp", ["-a", source, target])
    #expect(result.status == 0, "\(result.output)")
}

@Suite("hcpack install: crashes, full disks, concurrent installs", .serialized)
struct InstallRobustnessTests {
    /// Version 1 and 2 of a package of a few MB in many files: same paths, different bytes, and each with a
    /// file the other lacks (so an upgrade places, replaces and removes).
    static func packages(in folder: TemporaryFolder) -> (v1: String, v2: String) {
        var v1 = PackageArchive(files: [("only-v1.txt", "dropped in 2\n")])
        v1.generated = ("data/", 100, 20_000, 1)
        var v2 = PackageArchive(version: "2", files: [("only-v2.txt", "new in 2\n")])
        v2.generated = ("data/", 100, 20_000, 2)
        return (v1.write(to: folder.url("v1.zip")), v2.write(to: folder.url("v2.zip")))
    }

    @Test(
        "SIGKILL at any point leaves no partial file at a final path, and a rerun reaches the clean result",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func killAnywhere() throws {
        try Requirement.strace.require()
        let folder = TemporaryFolder()
        // Kills test the page cache, not the disk: a tmpfs keeps 50 installs quick when it can be mounted.
        let small = SmallFileSystem(at: folder.url("fs"), size: "256m")
        defer { withExtendedLifetime(small) {} }  // unmounted only after the last run
        let base = small?.path ?? folder.url("fs")
        try? FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        let (v1, v2) = Self.packages(in: folder)
        let binary = hcpackBinary()

        // References: the clean results, and the bytes each version installs.
        let fresh = base + "/fresh"
        let upgraded = base + "/upgraded"
        let withV1 = base + "/with-v1"
        for dest in [fresh, upgraded] {
            folder.write(String(dest.dropFirst(folder.path.count + 1)) + "/mine.txt", "user file\n")
        }
        let start = Date()
        #expect(run(binary, ["install", v2, "--dest", fresh]).status == 0)
        let duration = Date().timeIntervalSince(start)
        #expect(run(binary, ["install", v1, "--dest", upgraded]).status == 0)
        copyTree(upgraded, to: withV1)
        #expect(run(binary, ["install", v2, "--dest", upgraded]).status == 0)
        let v1Files = regularFiles(withV1)
        let v2Files = regularFiles(fresh)
        #expect(v2Files.count == 102 && v1Files.count == 102)
        let freshListing = treeListing(fresh)
        let upgradedListing = treeListing(upgraded)
        // How many renames each kind of install makes: the strace runs kill at one of them, so each one dies
        // (a fixed K past a first install's last rename let it finish, and then the random runs, which land
        // after the install when the machine is loaded, decided whether enough runs were interrupted).
        let freshRenames = try Self.renameCount(binary, v2, dest: base + "/count-fresh", copying: nil, folder: folder)
        let upgradeRenames = try Self.renameCount(binary, v2, dest: base + "/count-upgrade", copying: withV1, folder: folder)

        var generator = SystemRandomNumberGenerator()
        var killedRuns = 0
        for index in 0..<24 {
            let isUpgrade = index % 2 == 1
            let dest = base + "/run-\(index)"
            if isUpgrade {
                copyTree(withV1, to: dest)
            } else {
                folder.write(String(dest.dropFirst(folder.path.count + 1)) + "/mine.txt", "user file\n")
            }
            // Half the runs die at the K-th rename (journal, files, the stale file moved aside, receipt), half
            // after a random delay.
            let renames = isUpgrade ? upgradeRenames : freshRenames
            let outcome = try Self.killedInstall(
                binary, v2, dest, atRename: index < 12 ? 1 + (index * 37) % renames : nil, within: duration,
                using: &generator)
            if outcome.killed { killedRuns += 1 }
            if index < 12 { #expect(outcome.killed, "run \(index) was not killed at rename \(1 + (index * 37) % renames) of \(renames)") }

            // The invariant: every file at a final path is whole, one version's bytes or the user's own.
            for (path, data) in regularFiles(dest) {
                let whole = data == v2Files[path] || (isUpgrade && data == v1Files[path])
                #expect(whole, "run \(index): \(path) holds \(data.count) bytes that are no version's")
            }
            let rerun = run(binary, ["install", v2, "--dest", dest])
            #expect(rerun.status == 0, "run \(index): \(rerun.output)")
            #expect(
                treeListing(dest) == (isUpgrade ? upgradedListing : freshListing),
                "run \(index) ended elsewhere than a clean install")
            try? FileManager.default.removeItem(atPath: dest)
        }
        #expect(killedRuns >= 12, "most runs were interrupted (\(killedRuns) of 24)")
    }

    /// The rename calls `install archive --dest dest` makes (strace), into a copy of `copying` or an empty folder.
    static func renameCount(_ binary: String, _ archive: String, dest: String, copying: String?, folder: TemporaryFolder) throws -> Int {
        if let copying { copyTree(copying, to: dest) } else { try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true) }
        defer { try? FileManager.default.removeItem(atPath: dest) }
        let log = folder.url("renames-\(UUID().uuidString).log")
        let traced = run("strace", ["-f", "-qq", "-e", "trace=renameat,renameat2,rename", "-o", log, binary, "install", archive, "--dest", dest])
        try #require(traced.status == 0, "\(traced.output)")
        let lines = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n")
        let count = lines.filter { $0.contains("rename") && !$0.contains("resumed>") }.count
        try #require(count > 0, "strace saw no rename")
        return count
    }

    /// Runs `install archive --dest dest`, killed at the `atRename`-th rename (strace), or without it after a
    /// random delay up to `within` seconds. `killed` is true only when hcpack was running and died of SIGKILL:
    /// a run that ended by itself, or that strace could not start, is not a kill.
    static func killedInstall(
        _ binary: String, _ archive: String, _ dest: String, atRename: Int?, within duration: TimeInterval,
        using generator: inout SystemRandomNumberGenerator
    ) throws -> (status: Int32, killed: Bool, stdout: String, stderr: String) {
        let install = [binary, "install", archive, "--dest", dest]
        if let when = atRename {
            // Only hcpack renames here: strace kills it at its own K-th rename, so a SIGKILL means it ran.
            let child = ChildInstall(
                "/usr/bin/env",
                ["strace", "-f", "-o", "/dev/null", "-e", "inject=renameat,renameat2,rename:signal=KILL:when=\(when)"] + install)
            try child.start()
            let outcome = child.finish()
            #expect(diedOfSIGKILL(outcome) || outcome.status == 0, "strace or hcpack failed: \(outcome.stderr)")
            return (outcome.status, diedOfSIGKILL(outcome), outcome.stdout, outcome.stderr)
        }
        let child = ChildInstall(binary, Array(install.dropFirst()))
        try child.start()
        usleep(UInt32.random(in: 0...UInt32(max(duration, 0.05) * 1_000_000), using: &generator))
        let wasRunning = child.isRunning(binary)
        kill(child.process.processIdentifier, SIGKILL)
        let outcome = child.finish()
        #expect(diedOfSIGKILL(outcome) || outcome.status == 0, "hcpack failed: \(outcome.stderr)")
        return (outcome.status, wasRunning && diedOfSIGKILL(outcome), outcome.stdout, outcome.stderr)
    }

    @Test(
        "SIGKILL at any point of a delta install leaves only whole files, and rerunning the delta reaches the full upgrade",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func killDeltaAnywhere() throws {
        try Requirement.strace.require()
        let folder = TemporaryFolder()
        let small = SmallFileSystem(at: folder.url("fs"), size: "256m")
        defer { withExtendedLifetime(small) {} }
        let base = small?.path ?? folder.url("fs")
        try? FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        // 100 files of 20 kB carried over, 30 changed, one added and one removed.
        let changed = (0..<30).map { ("edit/\($0).txt", String(repeating: "version 1, file \($0)\n", count: 400)) }
        var v1Package = PackageArchive(files: changed + [("only-v1.txt", "dropped in 2\n")])
        v1Package.generated = ("data/", 100, 20_000, 1)
        var v2Package = PackageArchive(
            version: "2", files: changed.map { ($0.0, $0.1.replacingOccurrences(of: "version 1", with: "version 2")) } + [("only-v2.txt", "new\n")])
        v2Package.generated = ("data/", 100, 20_000, 1)
        let v1 = v1Package.write(to: folder.url("v1.zip")), v2 = v2Package.write(to: folder.url("v2.zip"))
        let binary = hcpackBinary()
        let delta = folder.url("delta.zip")
        #expect(run(binary, ["delta", v1, v2, "-o", delta]).status == 0)

        let withV1 = base + "/with-v1", upgraded = base + "/upgraded"
        folder.write(String(withV1.dropFirst(folder.path.count + 1)) + "/mine.txt", "user file\n")
        #expect(run(binary, ["install", v1, "--dest", withV1]).status == 0)
        copyTree(withV1, to: upgraded)
        let start = Date()
        #expect(run(binary, ["install", v2, "--dest", upgraded]).status == 0)
        let duration = Date().timeIntervalSince(start)
        let v1Files = regularFiles(withV1), v2Files = regularFiles(upgraded)
        let upgradedListing = treeListing(upgraded)

        var generator = SystemRandomNumberGenerator()
        var killedRuns = 0
        for index in 0..<16 {
            let dest = base + "/run-\(index)"
            copyTree(withV1, to: dest)
            // Half the runs die at the K-th rename (journal, 31 files, the stale file, the receipt: K up to 29 is
            // always reached, so these eight always die), half after a random delay (under load some of those
            // come after the install ended).
            let outcome = try Self.killedInstall(
                binary, delta, dest, atRename: index < 8 ? 1 + index * 4 : nil, within: duration, using: &generator)
            if outcome.killed { killedRuns += 1 }
            for (path, data) in regularFiles(dest) {
                #expect(data == v2Files[path] || data == v1Files[path], "run \(index): \(path) holds \(data.count) bytes that are no version's")
            }
            // The delta still applies: its base's receipt (or already the new one) and the carried files are intact.
            let rerun = run(binary, ["install", delta, "--dest", dest])
            #expect(rerun.status == 0, "run \(index): \(rerun.output)")
            #expect(treeListing(dest) == upgradedListing, "run \(index) ended elsewhere than a full upgrade")
            try? FileManager.default.removeItem(atPath: dest)
        }
        #expect(killedRuns >= 8, "most runs were interrupted (\(killedRuns) of 16)")
    }

    /// 3 MB of incompressible files, more than a 2 MB tmpfs or `ulimit -f 40` holds.
    static func bigPackage(_ folder: TemporaryFolder) -> String {
        var package = PackageArchive()
        package.generated = ("big/", 60, 50_000, 3)  // 3 MB, incompressible
        return package.write(to: folder.url("big.zip"))
    }

    @Test("A file size limit (writes fail with EFBIG) fails the install with exit 3, removes the staging folder and leaves DEST as it was")
    func diskFull() throws {
        let folder = TemporaryFolder()
        try Self.expectRefusedWhenFull(Self.bigPackage(folder), in: folder, fileLimitKiB: 40)
    }

    @Test(
        "A full file system (2 MB tmpfs) fails the install with exit 3, removes the staging folder and leaves DEST as it was",
        .enabled(if: Requirement.mount.enabled, Requirement.mount.comment))
    func fileSystemFull() throws {
        try Requirement.mount.require()
        let folder = TemporaryFolder()
        try Self.expectRefusedOnFullFileSystem(Self.bigPackage(folder), in: folder)
    }

    /// Installs `archive` (about 3 MB of files) onto a 2 MB tmpfs (root): exit 3 saying so, DEST (holding a
    /// user's file) as it was, nothing left beside it.
    static func expectRefusedOnFullFileSystem(_ archive: String, in folder: TemporaryFolder) throws {
        let small = try #require(SmallFileSystem(at: folder.url("small"), size: "2m"))
        let dest = small.path + "/dest"
        folder.write("small/dest/mine.txt", "user file\n")
        let before = treeListing(dest)
        let result = run(hcpackBinary(), ["install", archive, "--dest", dest])
        #expect(result.status == 3, "\(result.output)")
        #expect(result.output.contains("No space left on device"), "\(result.output)")
        #expect(result.output.contains(dest), "\(result.output)")
        #expect(treeListing(dest) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: small.path) == ["dest"])
    }

    /// Installs `archive` under a file size limit (`ulimit -f`, under which writes fail with EFBIG): exit 3
    /// saying so, DEST (holding a user's file) as it was, no staging folder left.
    static func expectRefusedWhenFull(_ archive: String, in folder: TemporaryFolder, fileLimitKiB: Int) throws {
        let binary = hcpackBinary()
        folder.write("dest/mine.txt", "user file\n")
        let dest = folder.url("dest")
        let before = treeListing(dest)
        let result = run(
            "/bin/bash",
            ["-c", "ulimit -f \(fileLimitKiB); trap '' XFSZ; exec \"$0\" install \"$1\" --dest \"$2\"", binary, archive, dest])
        #expect(result.status == 3, "\(result.output)")
        #expect(result.output.contains("File too large"), "\(result.output)")
        #expect(treeListing(dest) == before, "no staging folder, lock or .hcpack left")
    }

    @Test(
        "Reinstalling on a nearly full file system works: files already in place are not staged again",
        .enabled(if: Requirement.mount.enabled, Requirement.mount.comment))
    func reinstallOnFullDisk() throws {
        try Requirement.mount.require()
        let folder = TemporaryFolder()
        var package = PackageArchive()
        package.generated = ("big/", 60, 50_000, 4)  // 3 MB, incompressible
        let archive = package.write(to: folder.url("big.zip"))
        // Needs a small file system: root mounts a tmpfs; elsewhere `ulimit -f` cannot model free space.
        let small = try #require(SmallFileSystem(at: folder.url("small"), size: "4m"))
        let dest = small.path + "/dest"
        folder.makeFolder("small/dest")
        let binary = hcpackBinary()
        #expect(run(binary, ["install", archive, "--dest", dest]).status == 0)
        let before = treeListing(dest)
        let again = run(binary, ["install", archive, "--dest", dest])
        #expect(again.status == 0, "\(again.output)")
        #expect(again.output.contains("already installed"))
        #expect(treeListing(dest) == before)
    }

    @Test("Two installs into one DEST at once never interleave: one waits or fails cleanly, the result is a clean install")
    func concurrent() throws {
        let folder = TemporaryFolder()
        let (_, v2) = Self.packages(in: folder)
        let binary = hcpackBinary()
        folder.makeFolder("reference")
        #expect(run(binary, ["install", v2, "--dest", folder.url("reference")]).status == 0)
        let reference = treeListing(folder.url("reference"))

        for (round, wait) in [(0, false), (1, false), (2, true)] {
            let dest = folder.url("dest-\(round)")
            folder.makeFolder("dest-\(round)")
            let arguments = ["install", v2, "--dest", dest, "--json"] + (wait ? ["--wait"] : [])
            let first = ChildInstall(binary, arguments)
            let second = ChildInstall(binary, arguments)
            try first.start()
            try second.start()
            let outcomes = [first.finish(), second.finish()]
            for outcome in outcomes {
                #expect(!outcome.killed)
                if outcome.status != 0 {
                    #expect(!wait, "with --wait both installs succeed: \(outcome.stderr)")
                    #expect(outcome.status == 3)
                    #expect(outcome.stderr.contains("another hcpack install is running in \(dest)"), "\(outcome.stderr)")
                }
            }
            #expect(outcomes.contains { $0.status == 0 })
            if wait {
                let statuses = outcomes.compactMap { jsonObject($0.stdout)?["status"] as? String }.sorted()
                #expect(statuses == ["installed", "unchanged"], "the second install saw the first one's complete result")
            }
            #expect(treeListing(dest) == reference, "round \(round)")
        }
    }
}
