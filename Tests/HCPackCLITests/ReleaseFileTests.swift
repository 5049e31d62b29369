import Foundation
import HCPackCLI
import HostedContent
import TestSupport
import Testing

@Suite("hcpack --version, sign-file and verify-file (release artifacts, issue 31)")
struct ReleaseFileTests {
    @Test("--version names the version, the commit the binary was built from, and the licence")
    func version() throws {
        let result = hcpack(["--version"])
        #expect(result.status == 0)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count >= 3)
        #expect(lines[0] == "hcpack \(HCPack.version)")
        #expect(lines[1] == "commit \(HCPack.commit)")
        let commit = HCPack.commit
        let hex = commit.hasSuffix("-dirty") ? String(commit.dropLast(6)) : commit
        #expect(commit == "unknown" || (hex.count == 40 && hex.allSatisfy(\.isHexDigit)) || ProcessInfo.processInfo.environment["HCPACK_COMMIT"] != nil)
        #expect(result.stdout.contains("Apache License, Version 2.0"))
        // The built binary says the same as the library it links.
        #expect(run(hcpackBinary(), ["--version"]).output == result.stdout)
    }

    /// A key, its .pub, and a file to sign in a fresh folder.
    struct Bench {
        let folder = TemporaryFolder()
        var file: String { folder.url("hcpack-1.0-linux-x86_64.tar.gz") }
        var pub: String { folder.url("k.pem.pub") }

        init() {
            folder.write("hcpack-1.0-linux-x86_64.tar.gz", [UInt8](repeating: 0x5a, count: 3000))
            _ = hcpack(["keygen", "--name", "example.com/release", "-o", folder.url("k.pem")])
        }

        func sign(_ extra: [String] = []) -> (status: Int32, stdout: String, stderr: String) {
            hcpack(["sign-file", file, "--key", folder.url("k.pem")] + extra)
        }
    }

    @Test("sign-file writes FILE.hcsig with the documented text; verify-file accepts it")
    func roundTrip() throws {
        let bench = Bench()
        let signed = bench.sign()
        #expect(signed.status == 0, "\(signed.stderr)")
        let note = try SignedNote.parse(try #require(bench.folder.read("hcpack-1.0-linux-x86_64.tar.gz.hcsig")))
        let digest = String(run("sha256sum", [bench.file]).output.prefix(64))  // another program's hash
        #expect(digest.count == 64)
        #expect(
            String(decoding: note.text, as: UTF8.self)
                == "hcpack file v1\nname hcpack-1.0-linux-x86_64.tar.gz\nsize 3000\nsha256 \(digest)\n")
        let checked = hcpack(["verify-file", bench.file, "--trusted-key", bench.pub])
        #expect(checked.status == 0, "\(checked.stdout)\(checked.stderr)")
        #expect(checked.stdout.contains("signed by example.com/release"))
        // An existing note is kept unless --force.
        #expect(bench.sign().status == 2)
        #expect(bench.sign(["--force"]).status == 0)
    }

    @Test("verify-file refuses a changed file, a renamed one, an untrusted key, a package note and a missing note")
    func refusals() throws {
        let bench = Bench()
        #expect(bench.sign().status == 0)
        let folder = bench.folder

        var bytes = try #require(folder.read("hcpack-1.0-linux-x86_64.tar.gz"))
        bytes[10] ^= 1
        folder.write("changed.tar.gz", bytes)
        folder.write("changed.tar.gz.hcsig", try #require(folder.read("hcpack-1.0-linux-x86_64.tar.gz.hcsig")))
        let changed = hcpack(["verify-file", folder.url("changed.tar.gz"), "--trusted-key", bench.pub])
        #expect(changed.status == 1)
        #expect(changed.stdout.contains("[signature.mismatch]"))
        #expect(changed.stdout.contains("the file changed after signing"))
        #expect(changed.stdout.contains("signs a file named 'hcpack-1.0-linux-x86_64.tar.gz', not 'changed.tar.gz'"))

        _ = hcpack(["keygen", "--name", "example.com/other", "-o", folder.url("other.pem")])
        let untrusted = hcpack(["verify-file", bench.file, "--trusted-key", folder.url("other.pem.pub")])
        #expect(untrusted.status == 1)
        #expect(untrusted.stdout.contains("[signature.untrusted]"))

        // A package's note is not a file's note, though the same key signed it.
        let packageNote = SignedNote(text: Array("hcpack package v1\nproduct a\n".utf8))
        folder.write("hcpack-1.0-linux-x86_64.tar.gz.hcsig", packageNote.encoded() + Array("\u{2014} x AAAAAAA=\n".utf8))
        let malformed = hcpack(["verify-file", bench.file, "--trusted-key", bench.pub])
        #expect(malformed.status == 1)
        #expect(malformed.stdout.contains("[signature.malformed]"))

        folder.remove("hcpack-1.0-linux-x86_64.tar.gz.hcsig")
        let missing = hcpack(["verify-file", bench.file, "--trusted-key", bench.pub])
        #expect(missing.status == 1)
        #expect(missing.stdout.contains("[signature.missing]"))
        #expect(hcpack(["verify-file", folder.url("absent"), "--trusted-key", bench.pub]).status == 3)
        #expect(hcpack(["verify-file", bench.file]).status == 2)
    }

    @Test("Go's note.Open verifies a file note with the key's verifier line (make deps installs Go)")
    func go() throws {
        let bench = Bench()
        #expect(bench.sign().status == 0)
        let binary = try SigningInteropTests.buildNoteCheck(in: bench.folder)
        let line = String(decoding: try #require(bench.folder.read("k.pem.pub")), as: UTF8.self)
            .trimmingCharacters(in: .newlines)
        let note = try #require(bench.folder.read("hcpack-1.0-linux-x86_64.tar.gz.hcsig"))
        let opened = runWithInput(binary, ["verify", line], input: note)
        #expect(opened.status == 0, "\(opened.output)")
        #expect(opened.output.hasPrefix("hcpack file v1\nname hcpack-1.0-linux-x86_64.tar.gz\nsize 3000\n"))
    }
}
