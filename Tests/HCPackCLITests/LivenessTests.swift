import Foundation
import TestSupport
import Testing

/// Issue 18: every command ends on any input, or stops with a clear error and a rule, exit 1, DEST untouched.
@Suite("Liveness: the watchdog and the one reader every command shares")
struct LivenessTests {
    /// Starts the built hcpack with `arguments` on a FIFO that delivers the first 100 KiB of a tar (a header
    /// that declares 1 MiB of data) and then nothing, with the writer held open, so a read inside libarchive
    /// blocks for good. Returns "STATUS stderr", then "\nSTDOUT:" and stdout; a hang fails after 120 s instead
    /// of blocking the suite.
    private func runStalled(_ arguments: [String], in folder: TemporaryFolder) -> String {
        python(
            """
            import io, os, subprocess, tarfile
            os.mkfifo('stall.tar')
            command = [\(([hcpackBinary()] + arguments).map { "'\($0)'" }.joined(separator: ", "))]
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=dict(os.environ, HCPACK_STALL_SECONDS='2'))
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode='w', format=tarfile.PAX_FORMAT) as t:
                info = tarfile.TarInfo('Contents/big.bin'); info.size = 1 << 20
                t.addfile(info, io.BytesIO(b'x' * (1 << 20)))
            writer = open('stall.tar', 'wb')
            writer.write(buffer.getvalue()[:100 << 10]); writer.flush()
            try:
                out, err = child.communicate(timeout=120)
                print(child.returncode, err.decode().strip())
                print('STDOUT:' + out.decode())
            except subprocess.TimeoutExpired:
                child.kill(); print('hang')
            writer.close()
            """, in: folder.path
        ).output
    }

    @Test("verify: a read that makes no progress stops with exit 1 and archive.stalled, naming the input")
    func verifyStalls() {
        let folder = TemporaryFolder()
        let output = runStalled(["verify", folder.url("stall.tar")], in: folder)
        #expect(output.hasPrefix("1 hcpack: error: [archive.stalled] '\(folder.url("stall.tar"))'"), "\(output)")
        #expect(output.contains("no progress for 2 s"), "\(output)")
    }

    @Test("verify --json: the watchdog's stop prints the error object on stdout too (docs/json.md)")
    func verifyStallsJSON() throws {
        let folder = TemporaryFolder()
        let output = runStalled(["verify", "--json", folder.url("stall.tar")], in: folder)
        #expect(output.hasPrefix("1 hcpack: error: [archive.stalled]"), "\(output)")
        let stdout = try #require(output.components(separatedBy: "\nSTDOUT:").last)
        let error = try #require(jsonObject(stdout)?["error"] as? [String: Any], "\(stdout)")
        #expect(error["exitCode"] as? Int == 1)
        #expect((error["message"] as? String)?.hasPrefix("[archive.stalled]") == true)
        let validator = JSONSchemaValidator(folder: JSONSchemaTests.schemas)
        #expect(try validator.validate(try JSONDocument.parse(stdout), against: "verify.schema.json").isEmpty)
    }

    @Test("install: the watchdog's stop leaves DEST as a crash would, and the next install tidies it")
    func installStalls() throws {
        let folder = TemporaryFolder()
        let dest = folder.url("dest")
        folder.makeFolder("dest")
        folder.write("dest/mine.txt", "the user's own file")
        let output = runStalled(["install", folder.url("stall.tar"), "--dest", dest], in: folder)
        #expect(output.hasPrefix("1 hcpack: error: [archive.stalled]"), "\(output)")
        let left = try FileManager.default.contentsOfDirectory(atPath: dest).sorted()
        #expect(left == [".hcpack", "mine.txt"], "\(left)")
        #expect(folder.read("dest/mine.txt") == Array("the user's own file".utf8))
        // A later install (here of a valid package) removes the stopped run's staging folder.
        writeValidPackage(in: folder, root: "pkg")
        zipFolder(folder.url("pkg"), to: folder.url("good.zip"))  // UTF-8-flagged names (Info-ZIP sets none)
        let rerun = hcpack(["install", folder.url("good.zip"), "--dest", dest])
        #expect(rerun.status == 0, "\(rerun.stdout)\(rerun.stderr)")
        let records = (try? FileManager.default.contentsOfDirectory(atPath: dest + "/.hcpack")) ?? []
        #expect(!records.contains { $0.hasPrefix("staging-") }, "\(records)")
    }

    @Test("verify, inspect, diff and install refuse a gzip inside a gzip with archive.nested-compression")
    func sameReader() throws {
        let folder = TemporaryFolder()
        let made = python(
            "import gzip; open('bad.gz','wb').write(gzip.compress(b'\\x1f\\x8b\\x08\\x08' + bytes(6) + b'a' * (16 << 20), 9))",
            in: folder.path)
        try #require(made.status == 0, "\(made.output)")
        writeValidPackage(in: folder, root: "pkg")
        zipFolder(folder.url("pkg"), to: folder.url("good.zip"))  // UTF-8-flagged names (Info-ZIP sets none)
        folder.makeFolder("dest")
        let bad = folder.url("bad.gz")
        let runs = [
            hcpack(["verify", bad]), hcpack(["inspect", bad]), hcpack(["diff", folder.url("good.zip"), bad]),
            hcpack(["install", bad, "--dest", folder.url("dest")]),
        ]
        for result in runs {
            #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        }
        // verify and install list the problem; inspect counts it; diff names it.
        for result in [runs[0], runs[3]] {
            #expect(result.stdout.contains("[archive.nested-compression]"), "\(result.stdout)")
            #expect(result.stdout.contains("is gzip data compressed again with gzip"), "\(result.stdout)")
        }
        #expect(runs[1].stdout.contains("INVALID, 1 error"), "\(runs[1].stdout)")
        #expect(runs[2].stderr.contains("compressed again"), "\(runs[2].stderr)")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: folder.url("dest"))) ?? []
        #expect(left.isEmpty, "\(left)")
    }
}
