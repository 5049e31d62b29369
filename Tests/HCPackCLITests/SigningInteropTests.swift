import Foundation
import HostedContent
import TestSupport
import Testing

/// A small Go program over golang.org/x/mod/sumdb/note: `verify VKEY` checks the note on stdin and prints its
/// text; `sign SKEY` signs the text on stdin and prints the note.
let noteCheckSource = #"""
    package main

    import (
    	"fmt"
    	"io"
    	"os"

    	"golang.org/x/mod/sumdb/note"
    )

    func main() {
    	input, _ := io.ReadAll(os.Stdin)
    	switch os.Args[1] {
    	case "verify":
    		verifier, err := note.NewVerifier(os.Args[2])
    		if err != nil {
    			fmt.Println("verifier:", err)
    			os.Exit(2)
    		}
    		n, err := note.Open(input, note.VerifierList(verifier))
    		if err != nil {
    			fmt.Println("open:", err)
    			os.Exit(1)
    		}
    		fmt.Print(n.Text)
    	case "sign":
    		signer, err := note.NewSigner(os.Args[2])
    		if err != nil {
    			fmt.Println("signer:", err)
    			os.Exit(2)
    		}
    		signed, err := note.Sign(&note.Note{Text: string(input)}, signer)
    		if err != nil {
    			fmt.Println("sign:", err)
    			os.Exit(1)
    		}
    		os.Stdout.Write(signed)
    	}
    }
    """#

/// Runs `executable` with `input` on stdin; stdout and stderr together.
func runWithInput(_ executable: String, _ arguments: [String], input: [UInt8], environment: [String: String] = [:]) -> (
    status: Int32, output: String
) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let output = Pipe()
    let inputPipe = Pipe()
    process.standardOutput = output
    process.standardError = output
    process.standardInput = inputPipe
    do { try process.run() } catch { return (127, "\(error)") }
    inputPipe.fileHandleForWriting.write(Data(input))
    try? inputPipe.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite("Signing interoperates with Go's sumdb/note and OpenSSL")
struct SigningInteropTests {
    static let goPackage = "/usr/share/gocode/src/golang.org/x/mod/sumdb/note/note.go"
    static var hasGo: Bool { FileManager.default.fileExists(atPath: goPackage) && run("go", ["version"]).status == 0 }
    static var hasOpenSSL: Bool { run("openssl", ["version"]).status == 0 }

    /// Builds the Go note checker (`noteCheckSource`) in `folder`, in GOPATH mode against Debian's
    /// golang-golang-x-mod-dev, and returns its path.
    static func buildNoteCheck(in folder: TemporaryFolder) throws -> String {
        try #require(hasGo, "Go or golang.org/x/mod is missing: run make deps")
        folder.write("go/src/notecheck/main.go", noteCheckSource)
        let environment = [
            "GO111MODULE": "off", "GOPATH": folder.url("go") + ":/usr/share/gocode", "GOCACHE": folder.url("go-cache"),
            "GOFLAGS": "", "HOME": folder.path,
        ]
        let binary = folder.url("notecheck")
        let goBinary =
            ["/usr/bin/go", "/usr/lib/go/bin/go"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/go"
        let build = runWithInput(goBinary, ["build", "-o", binary, "notecheck"], input: [], environment: environment)
        try #require(build.status == 0, "go build: \(build.output)")
        return binary
    }

    @Test(
        "Go verifies hcpack's note; hcpack accepts the note Go signs with the same key (make deps installs Go)",
        .enabled(if: Requirement.go.enabled, Requirement.go.comment))
    func go() throws {
        // Required, not skipped: interop is the point, and `make deps` installs golang-go and x/mod.
        try #require(Self.hasGo, "Go or golang.org/x/mod is missing: run make deps")
        let bench = SigningBench()
        let key = bench.key("a")
        #expect(bench.sign(key, ["--expires", "30d"]).status == 0)
        let binary = try Self.buildNoteCheck(in: bench.folder)

        // hcpack -> Go.
        let verifierLine = String(decoding: bench.folder.read("a.pem.pub") ?? [], as: UTF8.self).trimmingCharacters(in: .newlines)
        let note = try #require(bench.folder.read("rel.zip.hcsig"))
        let checked = runWithInput(binary, ["verify", verifierLine], input: note)
        #expect(checked.status == 0, "\(checked.output)")
        #expect(checked.output.hasPrefix("hcpack package v1\nproduct com.example.levels\n"))
        var tampered = note
        tampered[20] ^= 0x01
        #expect(runWithInput(binary, ["verify", verifierLine], input: tampered).status == 1)

        // Go -> hcpack: the same key, as Go's signer key PRIVATE+KEY+name+hash+base64(0x01 ‖ seed).
        let pem = String(decoding: bench.folder.read("a.pem") ?? [], as: UTF8.self)
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") && !$0.hasPrefix("hcpack") }.joined()
        let der = try #require(Data(base64Encoded: body))
        let seed = Array(der.suffix(32))
        let parts = verifierLine.split(separator: "+", maxSplits: 2)
        let signerKey = "PRIVATE+KEY+\(parts[0])+\(parts[1])+" + Data([0x01] + seed).base64EncodedString()
        let text = try #require(SignedNote.parse(note).text)
        let goSigned = runWithInput(binary, ["sign", signerKey], input: text)
        #expect(goSigned.status == 0, "\(goSigned.output)")
        bench.folder.write("go.hcsig", goSigned.output)
        let accepted = hcpack([
            "verify", bench.archive, "--trusted-key", verifierLine, "--signature", bench.folder.url("go.hcsig"),
        ])
        #expect(accepted.status == 0, "\(accepted.stdout)\(accepted.stderr)")
        #expect(
            hcpack([
                "install", bench.archive, "--dest", bench.dest, "--trusted-key", verifierLine, "--signature",
                bench.folder.url("go.hcsig"),
            ])
            .status == 0)
    }

    @Test("openssl pkey reads hcpack's key; hcpack signs with a key made by openssl genpkey")
    func openssl() throws {
        try #require(Self.hasOpenSSL, "openssl is missing: run make deps")
        let bench = SigningBench()
        let key = bench.key("a")
        let publicDER = bench.folder.url("a.der")
        let read = run("openssl", ["pkey", "-in", key, "-pubout", "-outform", "DER", "-out", publicDER])
        #expect(read.status == 0, "\(read.output)")
        let line = String(decoding: bench.folder.read("a.pem.pub") ?? [], as: UTF8.self).trimmingCharacters(in: .newlines)
        let verifier = try VerifierKey(line: line)
        #expect(Array((bench.folder.read("a.der") ?? []).suffix(32)) == verifier.publicKey)

        let genpkey = bench.folder.url("o.pem")
        #expect(run("openssl", ["genpkey", "-algorithm", "ed25519", "-out", genpkey]).status == 0)
        chmod(genpkey, 0o600)
        let unnamed = hcpack(["pubkey", genpkey])
        #expect(unnamed.status == 2 && unnamed.stderr.contains("--name"))
        let pubkey = hcpack(["pubkey", genpkey, "--name", "example.com/openssl"])
        #expect(pubkey.status == 0 && pubkey.stdout.hasPrefix("example.com/openssl+"))
        #expect(hcpack(["sign", bench.archive, "--key", genpkey, "--key-name", "example.com/openssl"]).status == 0)
        let trusted = pubkey.stdout.trimmingCharacters(in: .newlines)
        #expect(hcpack(["verify", bench.archive, "--trusted-key", trusted]).status == 0)
        // The public key openssl derives is the one hcpack prints.
        #expect(run("openssl", ["pkey", "-in", genpkey, "-pubout", "-outform", "DER", "-out", publicDER]).status == 0)
        #expect(Array((bench.folder.read("a.der") ?? []).suffix(32)) == (try VerifierKey(line: trusted)).publicKey)
    }
}
