import Foundation
import HostedContent
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A folder with a release archive, DEST (holding a user's file) and keys made by `hcpack keygen`.
final class SigningBench {
    let folder = TemporaryFolder()
    var archive: String { folder.url("rel.zip") }
    var note: String { archive + ".hcsig" }
    var dest: String { folder.url("dest") }

    init(version: String = "1.0", integrity: Bool = true) {
        folder.write("dest/mine.txt", "the user's file")
        var package = PackageArchive(version: version)
        package.integrity = integrity
        package.write(to: archive)
    }

    /// Makes key `name` at `FOLDER/name.pem` (and `.pub`); returns the private key's path.
    @discardableResult
    func key(_ name: String) -> String {
        let path = folder.url("\(name).pem")
        let result = hcpack(["keygen", "--name", "example.com/\(name)", "-o", path])
        #expect(result.status == 0, "\(result.stderr)")
        return path
    }

    func pub(_ name: String) -> String { folder.url("\(name).pem.pub") }

    @discardableResult
    func sign(_ key: String, _ extra: [String] = []) -> (status: Int32, stdout: String, stderr: String) {
        hcpack(["sign", archive, "--key", key] + extra)
    }

    /// A note signed by `key` for this archive's true statement, edited by `edit` before signing.
    func craftedNote(_ key: String, _ edit: (inout PackageStatement) -> Void) throws -> [UInt8] {
        let signer = try SigningKey.load(key, name: nil, environment: [:], relativeTo: "/")
        var statement = try #require(try PackageSigner.statement(of: archive).1)
        edit(&statement)
        let text = Array(statement.text.utf8)
        return SignedNote(text: text, signatures: [try signer.sign(text)]).encoded()
    }

    func writeNote(_ bytes: [UInt8]) { FileManager.default.createFile(atPath: note, contents: Data(bytes)) }
    func noteText() -> String { String(decoding: folder.read("rel.zip.hcsig") ?? [], as: UTF8.self) }
}

/// A way a signed release can be wrong; install and verify with --trusted-key must refuse each.
enum TamperCase: String, CaseIterable, Sendable {
    case noNote, otherKey, changedByte, rebuilt, editedText, otherProduct, otherVersion, expired, truncated, garbled,
        wrongLength, unsignedFile

    var rule: String {
        switch self {
        case .noNote: "signature.missing"
        case .otherKey: "signature.untrusted"
        case .changedByte, .rebuilt, .otherProduct, .otherVersion: "signature.mismatch"
        case .editedText: "signature.invalid"
        case .expired: "signature.expired"
        case .truncated, .garbled, .wrongLength: "signature.malformed"
        case .unsignedFile: "signature.unsigned-file"
        }
    }

    /// Prepares the bench: signs with key "a" (trusted) and then breaks something.
    func prepare(_ bench: SigningBench) throws {
        let a = bench.key("a")
        if self != .unsignedFile { #expect(bench.sign(a).status == 0) }
        switch self {
        case .noNote:
            bench.folder.remove("rel.zip.hcsig")
        case .otherKey:
            let b = bench.key("b")
            #expect(bench.sign(b, ["--force", "--signature", bench.note + ".b"]).status == 0)
            bench.folder.remove("rel.zip.hcsig")
            try FileManager.default.moveItem(atPath: bench.note + ".b", toPath: bench.note)
        case .changedByte:
            var bytes = try #require(bench.folder.read("rel.zip"))
            bytes[bytes.count / 2] ^= 0x01
            bench.folder.write("rel.zip", bytes)
        case .rebuilt:
            // Other content, digests recomputed: a valid package, but not the one signed.
            var package = PackageArchive(version: "1.0", files: [("index.json", "{\"title\": \"Evil\"}\n")])
            package.product = "com.example.levels"
            package.write(to: bench.archive)
        case .editedText:
            bench.writeNote(Array(bench.noteText().replacingOccurrences(of: "version 1.0", with: "version 1.00").utf8))
        case .otherProduct:
            bench.writeNote(try bench.craftedNote(a) { $0.productIdentifier = "com.example.other" })
        case .otherVersion:
            bench.writeNote(try bench.craftedNote(a) { $0.version = "2.0" })
        case .expired:
            bench.writeNote(try bench.craftedNote(a) { $0.expires = Date(timeIntervalSinceNow: -60) })
        case .truncated:
            let text = bench.noteText()
            bench.writeNote(Array(text.utf8.prefix(text.utf8.count - 20)))
        case .garbled:
            bench.writeNote(Array(bench.noteText().replacingOccurrences(of: "\u{2014} ", with: "-- ").utf8))
        case .wrongLength:
            let text = bench.noteText()
            let line = try #require(text.split(separator: "\n").last)
            let encoded = try #require(Data(base64Encoded: String(line.split(separator: " ")[2])))
            let short = "\u{2014} example.com/a " + Data(encoded.dropLast()).base64EncodedString()
            bench.writeNote(Array(text.replacingOccurrences(of: String(line), with: short).utf8))
        case .unsignedFile:
            bench.writeNote(try bench.craftedNote(a) { _ in })
        }
    }
}

@Suite("hcpack keygen, pubkey, sign; verify and install --trusted-key")
struct SignCommandTests {
    @Test(
        "Each broken release is refused by verify and install (exit 1, with its rule), DEST untouched",
        arguments: TamperCase.allCases)
    func tampered(_ tamper: TamperCase) throws {
        let bench = SigningBench(integrity: tamper != .unsignedFile)
        try tamper.prepare(bench)
        let before = treeListing(bench.dest)
        let install = hcpack(["install", bench.archive, "--dest", bench.dest, "--trusted-key", bench.pub("a")])
        #expect(install.status == 1, "\(install.stdout)\(install.stderr)")
        #expect(install.stdout.contains("[\(tamper.rule)]"), "\(install.stdout)")
        #expect(treeListing(bench.dest) == before)
        let verify = hcpack(["verify", bench.archive, "--trusted-key", bench.pub("a"), "--json"])
        #expect(verify.status == 1)
        let report = try #require(jsonObject(verify.stdout))
        let rules = (report["problems"] as? [[String: Any]] ?? []).compactMap { $0["rule"] as? String }
        #expect(rules.contains(tamper.rule), "\(rules)")
        #expect((report["signature"] as? [String: Any])?["valid"] as? Bool == false)
    }

    @Test("Sign, verify and install with the trusted key; the receipt and inspect name the signer")
    func roundTrip() throws {
        let bench = SigningBench()
        let a = bench.key("a")
        let signed = bench.sign(a, ["--expires", "30d"])
        #expect(signed.status == 0, "\(signed.stderr)")
        let lines = bench.noteText().split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first == "hcpack package v1" && lines[6].hasPrefix("expires ") && lines[7].isEmpty)
        #expect(lines[8].hasPrefix("\u{2014} example.com/a "))
        #expect(hcpack(["verify", bench.archive, "--trusted-key", bench.pub("a")]).status == 0)
        let install = hcpack(["install", bench.archive, "--dest", bench.dest, "--trusted-key", bench.pub("a")])
        #expect(install.status == 0, "\(install.stdout)\(install.stderr)")
        let receipt = try #require(
            InstallReceipt.decode(bench.folder.read("dest/.hcpack/receipts/com.example.levels.json") ?? []))
        let hash = try #require(
            bench.folder.read("a.pem.pub").map { String(decoding: $0, as: UTF8.self) }?.split(separator: "+")[1])
        #expect(receipt.signers == [NoteSigner(name: "example.com/a", keyHash: String(hash))])
        let inspect = hcpack(["inspect", bench.dest])
        #expect(inspect.status == 0, "\(inspect.stderr)")
        #expect(inspect.stdout.contains("example.com/a (\(hash))"))
        let json = try #require(jsonObject(hcpack(["inspect", bench.dest, "--json"]).stdout))
        let receipts = json["receipts"] as? [[String: Any]]
        #expect((receipts?.first?["signers"] as? [[String: Any]])?.first?["keyHash"] as? String == String(hash))
    }

    @Test("inspect DEST escapes control characters a tampered receipt puts in signer names, product and version")
    func tamperedReceiptNames() throws {
        let bench = SigningBench()
        bench.sign(bench.key("a"))
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest, "--trusted-key", bench.pub("a")]).status == 0)
        let path = "dest/.hcpack/receipts/com.example.levels.json"
        let receipt = String(decoding: bench.folder.read(path) ?? [], as: UTF8.self)
        try #require(receipt.contains("\"example.com/a\""))
        // An escape sequence that would retitle the terminal and turn the text red.
        bench.folder.write(path, receipt.replacingOccurrences(of: "\"example.com/a\"", with: "\"example.com/a\\u001b]0;owned\\u0007\\u001b[31m\""))
        let inspect = hcpack(["inspect", bench.dest])
        #expect(inspect.status == 0, "\(inspect.stderr)")
        #expect(inspect.stdout.contains("example.com/a\\x1b]0;owned\\x07\\x1b[31m ("), "\(inspect.stdout)")
        #expect(!inspect.stdout.utf8.contains(0x1b) && !inspect.stdout.utf8.contains(0x07))
    }

    @Test("Without --trusted-key a note is reported, not required")
    func reportedOnly() throws {
        let bench = SigningBench()
        #expect(hcpack(["verify", bench.archive, "--json"]).status == 0)
        bench.sign(bench.key("a"))
        let result = hcpack(["verify", bench.archive, "--json"])
        #expect(result.status == 0)
        let signature = try #require(jsonObject(result.stdout)?["signature"] as? [String: Any])
        #expect(signature["present"] as? Bool == true)
        #expect(signature["valid"] is NSNull)
        #expect((signature["signers"] as? [[String: Any]])?.first?["name"] as? String == "example.com/a")
        bench.writeNote(Array("garbage".utf8))
        #expect(hcpack(["verify", bench.archive]).stdout.contains("malformed"))
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest]).status == 0)
    }

    @Test("Co-signing: after key A then key B, either public key alone verifies and installs")
    func coSigning() {
        let bench = SigningBench()
        #expect(bench.sign(bench.key("a"), ["--expires", "2099-01-01T00:00:00Z"]).status == 0)
        let second = bench.sign(bench.key("b"))
        #expect(second.status == 0 && second.stdout.contains("co-signed"), "\(second.stderr)")
        #expect(bench.noteText().components(separatedBy: "\u{2014} ").count == 3)
        #expect(bench.noteText().contains("expires 2099-01-01T00:00:00Z"))
        for name in ["a", "b"] {
            #expect(hcpack(["verify", bench.archive, "--trusted-key", bench.pub(name)]).status == 0)
        }
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest, "--trusted-key", bench.pub("b")]).status == 0)
        // A different text is refused unless --force.
        let other = bench.sign(bench.folder.url("a.pem"), ["--expires", "2098-01-01T00:00:00Z"])
        #expect(other.status == 2 && other.stderr.contains("--force"))
        #expect(bench.sign(bench.folder.url("a.pem"), ["--expires", "2098-01-01T00:00:00Z", "--force"]).status == 0)
        #expect(hcpack(["verify", bench.archive, "--trusted-key", bench.pub("b")]).status == 1)
    }

    @Test("With trusted keys a lower version is never installed, not even with --force")
    func rollback() {
        let bench = SigningBench(version: "1.1")
        let a = bench.key("a")
        #expect(bench.sign(a).status == 0)
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest, "--trusted-key", bench.pub("a")]).status == 0)
        PackageArchive(version: "1.0").write(to: bench.archive)
        #expect(bench.sign(a, ["--force"]).status == 0)
        let before = treeListing(bench.dest)
        let result = hcpack(["install", bench.archive, "--dest", bench.dest, "--trusted-key", bench.pub("a"), "--force"])
        #expect(result.status == 1 && result.stderr.contains("never downgrades"), "\(result.stderr)")
        #expect(treeListing(bench.dest) == before)
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest, "--force"]).status == 0)
    }

    @Test("Keys: 0600, never replaced, refused when others may read them, from env:VAR; never printed")
    func keys() throws {
        let bench = SigningBench()
        let a = bench.key("a")
        var info = stat()
        #expect(stat(a, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let again = hcpack(["keygen", "--name", "x", "-o", a])
        #expect(again.status == 2 && again.stderr.contains("already exists"))
        let pem = String(decoding: bench.folder.read("a.pem") ?? [], as: UTF8.self)
        let secret = try #require(pem.split(separator: "\n").first { !$0.contains("-----") && !$0.hasPrefix("hcpack") })
        #expect(pem.hasPrefix("hcpack-key-name: example.com/a\n-----BEGIN PRIVATE KEY-----\n"))
        var outputs: [String] = []
        chmod(a, 0o640)
        let loose = bench.sign(a)
        #expect(loose.status == 3 && loose.stderr.contains("chmod 600") && loose.stderr.contains(a))
        outputs += [loose.stdout, loose.stderr]
        let fromEnvironment = hcpack(
            ["sign", bench.archive, "--key", "env:HCPACK_KEY", "--json"], environment: ["HCPACK_KEY": pem])
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")
        let missing = hcpack(["sign", bench.archive, "--key", "env:NOPE"])
        #expect(missing.status == 3 && missing.stderr.contains("NOPE"))
        let pubkey = hcpack(["pubkey", "env:HCPACK_KEY"], environment: ["HCPACK_KEY": pem])
        #expect(pubkey.stdout == String(decoding: bench.folder.read("a.pem.pub") ?? [], as: UTF8.self))
        let garbled = hcpack(
            ["pubkey", "env:HCPACK_KEY"], environment: ["HCPACK_KEY": pem.replacingOccurrences(of: secret, with: "AAAA")])
        #expect(garbled.status == 2)
        outputs += [fromEnvironment.stdout, fromEnvironment.stderr, pubkey.stdout, pubkey.stderr, garbled.stdout, garbled.stderr]
        outputs.append(String(decoding: bench.folder.read("rel.zip.hcsig") ?? [], as: UTF8.self))
        for output in outputs { #expect(!output.contains(secret)) }
        #expect(hcpack(["keygen", "--name", "bad name", "-o", bench.folder.url("c.pem")]).status == 2)
    }

    @Test("sign refuses an invalid package and one whose files lack integrity records; nothing is written")
    func signRefuses() {
        let bench = SigningBench(integrity: false)
        let result = bench.sign(bench.key("a"))
        #expect(result.status == 1 && result.stdout.contains("[signature.unsigned-file]"))
        #expect(bench.folder.read("rel.zip.hcsig") == nil)
        let past = bench.sign(bench.folder.url("a.pem"), ["--expires", "2001-01-01T00:00:00Z"])
        #expect(past.status != 0)
        #expect(hcpack(["sign", bench.archive, "--key", bench.folder.url("a.pem"), "--expires", "soon"]).status == 2)
    }

    @Test("build --sign-key signs what it builds")
    func buildSigns() {
        let bench = SigningBench()
        let a = bench.key("a")
        writeValidPackage(in: bench.folder, root: "src")
        let output = bench.folder.url("built.zip")
        let result = hcpack(["build", bench.folder.url("src"), "-o", output, "--sign-key", a, "--expires", "90d"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("signed com.example.levels 1.0"))
        #expect(hcpack(["verify", output, "--trusted-key", bench.pub("a")]).status == 0)
        let key = String(decoding: bench.folder.read("a.pem.pub") ?? [], as: UTF8.self).trimmingCharacters(in: .newlines)
        #expect(hcpack(["install", output, "--dest", bench.dest, "--trusted-key", key]).status == 0)
    }
}
