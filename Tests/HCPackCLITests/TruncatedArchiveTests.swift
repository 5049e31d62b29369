import Foundation
import TestSupport
import Testing

/// Archives are read through a memory mapping (ArchiveIO's MappedInput): a file cut short by another
/// process mid-read raises SIGBUS, which the command line turns into an ordinary I/O failure; large stored
/// entries are read with `pread` beside it, and a short read says the same.
@Suite("An archive truncated while hcpack reads it")
struct TruncatedArchiveTests {
    /// Starts hcpack on a 160 MiB stored zip, waits until /proc shows the archive mapped, truncates it, and
    /// returns the exit status with stderr.
    private func runTruncating(_ arguments: [String], archive: String, in folder: TemporaryFolder) -> String {
        python(
            """
            import os, signal, subprocess, zipfile
            archive = '\(archive)'
            command = [\(arguments.map { "'\($0)'" }.joined(separator: ", "))]
            with zipfile.ZipFile(archive, 'w', zipfile.ZIP_STORED) as z:
                z.writestr('ContentInfo.plist', '<?xml version="1.0"?><plist version="1.0"><dict><key>IAPProductIdentifier</key><string>com.example.t</string><key>ContentVersion</key><string>1</string><key>Files</key><array><string>big.bin</string></array></dict></plist>')
                z.writestr('Contents/big.bin', os.urandom(160 << 20))
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            mapped = os.path.realpath(archive)
            seen = False
            while not seen and child.poll() is None:
                try:
                    seen = mapped in open(f'/proc/{child.pid}/maps').read()
                except OSError:
                    pass
            # hcpack is stopped while the archive is cut, so it cannot finish reading in between; a run that ended
            # before its mapping was seen says so instead of passing or failing by chance.
            if seen:
                os.kill(child.pid, signal.SIGSTOP)
            os.truncate(archive, 4096)
            if seen:
                os.kill(child.pid, signal.SIGCONT)
            out, err = child.communicate()
            print(child.returncode, err.decode().strip() if seen else 'hcpack ended before its mapping of the archive was seen')
            print('stdout:', out.decode().strip())
            """, in: folder.path
        ).output
    }

    @Test("verify: exit 3 with a message that says the archive was truncated, not a crash")
    func verify() {
        let folder = TemporaryFolder()
        let archive = folder.url("big.zip")
        let output = runTruncating([hcpackBinary(), "verify", archive], archive: archive, in: folder)
        // SIGBUS (the mapping) or a short pread beside it, whichever the cut met.
        #expect(output.hasPrefix("3 hcpack: error: an archive") && output.contains("was truncated while hcpack was reading it"), "\(output)")
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines).hasSuffix("stdout:"), "\(output)")
    }

    @Test("verify --json: exit 3 and the error object on stdout, as every --json failure prints one")
    func verifyJSON() throws {
        let folder = TemporaryFolder()
        let archive = folder.url("big.zip")
        let output = runTruncating([hcpackBinary(), "verify", archive, "--json"], archive: archive, in: folder)
        // SIGBUS (the mapping) or a short pread beside it, whichever the cut met: both print the object.
        #expect(output.hasPrefix("3 hcpack: error: an archive") && output.contains("was truncated while hcpack was reading it"), "\(output)")
        let stdout = try #require(output.components(separatedBy: "stdout: ").last)
        let object = try #require(jsonObject(stdout), "\(output)")
        #expect((object["error"] as? [String: Any])?["code"] as? String == "io", "\(stdout)")
    }

    @Test("install: exit 3, DEST holds nothing but hcpack's own folder, and the next install tidies its staging")
    func install() throws {
        let folder = TemporaryFolder()
        let archive = folder.url("big.zip")
        let dest = folder.url("dest")
        try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
        let output = runTruncating([hcpackBinary(), "install", archive, "--dest", dest], archive: archive, in: folder)
        // SIGBUS (the mapping) or a short pread beside it: both say the archive was truncated.
        #expect(output.hasPrefix("3 hcpack: error: an archive") && output.contains("was truncated while hcpack was reading it"), "\(output)")
        // SIGBUS (the mapped archive) ends the process with its staging left; a short read beside the mapping
        // (large stored entries, StoredDataHashing) fails the install, which removes everything it made.
        let left = try FileManager.default.contentsOfDirectory(atPath: dest)
        #expect(left == [".hcpack"] || left.isEmpty, "\(left)")
        // The killed run's staging folder goes with the next install (here refused: the archive is damaged).
        let rerun = run(hcpackBinary(), ["install", archive, "--dest", dest], in: folder.path)
        #expect(rerun.status != 0)
        let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: dest + "/.hcpack")) ?? []
        #expect(!leftovers.contains { $0.hasPrefix("staging-") }, "\(leftovers)")
    }

    @Test("delta: exit 3, nothing at -o, and the next delta to that output removes the temporary folder left")
    func delta() throws {
        let folder = TemporaryFolder()
        let archive = folder.url("big.zip")
        writeValidPackage(in: folder, root: "old", files: [("big.bin", "small\n")])
        folder.write(
            "old/ContentInfo.plist",
            plistXML("<key>IAPProductIdentifier</key><string>com.example.t</string><key>ContentVersion</key><string>0.9</string>\(filesXML(["big.bin"]))"))
        let old = folder.url("old.zip")
        #expect(hcpack(["build", folder.url("old"), "-o", old, "-q"]).status == 0)
        let patch = folder.url("patch.zip")
        let output = runTruncating([hcpackBinary(), "delta", old, archive, "-o", patch], archive: archive, in: folder)
        // Cut while read (SIGBUS or a short pread), or before: delta first maps each archive briefly for its plist,
        // and a cut seen then leaves a file that is no archive at all.
        let cutWhileRead = output.hasPrefix("3 hcpack: error: an archive") && output.contains("was truncated while hcpack was reading it")
        let cutBefore = output.hasPrefix("1 hcpack: error: ") && output.contains("(NEW) is not a valid package: [archive.")
        #expect(cutWhileRead || cutBefore, "\(output)")
        #expect(!FileManager.default.fileExists(atPath: patch))
        // SIGBUS leaves the temporary folder (a short pread beside the mapping fails the delta, which removes it);
        // one is planted too, named after a process that has ended, as SIGBUS or SIGKILL leaves it.
        func temporaries() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix(".patch.zip.hcpack-delta-") }
        }
        let ended = Process()
        ended.executableURL = URL(fileURLWithPath: "/bin/true")
        try ended.run()
        ended.waitUntilExit()
        folder.makeFolder(".patch.zip.hcpack-delta-\(ended.processIdentifier)-abcdef/new/staging-x/Contents")
        folder.write(".patch.zip.hcpack-delta-\(ended.processIdentifier)-abcdef/new/staging-x/Contents/a.bin", "left\n")
        #expect(try !temporaries().isEmpty)
        let rerun = run(hcpackBinary(), ["delta", old, archive, "-o", patch], in: folder.path)
        #expect(rerun.status == 1, "\(rerun.output)")
        #expect(try temporaries().isEmpty)
        // A folder of a process that still runs is not touched.
        let live = ".patch.zip.hcpack-delta-1-abcdef"
        folder.makeFolder(live)
        _ = run(hcpackBinary(), ["delta", old, archive, "-o", patch], in: folder.path)
        #expect(try temporaries() == [live])
    }
}
