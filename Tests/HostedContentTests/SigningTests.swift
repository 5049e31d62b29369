import Digest
import Foundation
import HostedContent
import Testing

@Suite("Signed notes, verifier keys and the package statement")
struct SigningTests {
    // The example of Go's golang.org/x/mod/sumdb/note (example_test.go).
    let goKey = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
    let goNote =
        "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n\n"
        + "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"

    @Test("Go's example note parses, and its signature verifies with Go's example key")
    func goExample() throws {
        let key = try VerifierKey(line: goKey)
        #expect(key.name == "PeterNeumann" && key.hashText == "c74f20a3" && key.line == goKey)
        let note = try SignedNote.parse(Array(goNote.utf8))
        let signature = try #require(note.signatures.first)
        #expect(signature.name == "PeterNeumann" && signature.keyHash == key.keyHash)
        #expect(Ed25519.isValidSignature(signature.signature, of: note.text, publicKey: key.publicKey))
        #expect(note.encoded() == Array(goNote.utf8))
    }

    @Test(
        "Malformed notes are refused",
        arguments: [
            "no signatures\n", "text\n\n", "text\n\n- PeterNeumann AAAA\n", "text\n\n\u{2014} Peter Neumann AAAAAAAA\n",
            "text\n\n\u{2014} PeterNeumann !!!!\n", "text\n\n\u{2014} PeterNeumann AAAA\n", "te\u{1}xt\n\n\u{2014} a AAAAAAAA\n",
            "text\n\n\u{2014} a AAAAAAAA",
        ])
    func malformedNotes(_ text: String) {
        #expect(throws: NoteFormatError.self) { try SignedNote.parse(Array(text.utf8)) }
    }

    @Test("A key whose base64 holds '+' parses back (only the first two '+' separate)")
    func plusInKey() throws {
        var found = false
        for _ in 0..<200 {
            let line = try SigningKey.generate(name: "example.com/levels").verifierKey.line
            guard line.split(separator: "+").count > 3 else { continue }
            #expect(try VerifierKey(line: line).line == line)
            found = true
            break
        }
        #expect(found)
    }

    @Test("Verifier keys: a changed hash, name or key is refused")
    func badKeys() {
        for line in [
            "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "PeterNeumanN+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "PeterNeumann+c74f20a3+AhpcxQcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "Peter Neumann+c74f20a3+AA==",
            "PeterNeumann+c74f20a3",
        ] {
            #expect(throws: HCPackError.self) { try VerifierKey(line: line) }
        }
    }

    let statement = PackageStatement(
        productIdentifier: "com.example.levels", version: "1.2", archiveSHA256: String(repeating: "ab", count: 32),
        archiveSize: 1234, plistSHA256: String(repeating: "0f", count: 32), expires: Date(timeIntervalSince1970: 1_811_808_000))

    @Test("The statement text is exactly the documented lines, and parses back")
    func statementText() throws {
        #expect(
            statement.text == """
                hcpack package v1
                product com.example.levels
                version 1.2
                archive-sha256 \(String(repeating: "ab", count: 32))
                archive-size 1234
                plist-sha256 \(String(repeating: "0f", count: 32))
                expires 2027-06-01T00:00:00Z

                """)
        #expect(try PackageStatement(text: Array(statement.text.utf8)) == statement)
        var noExpiry = statement
        noExpiry.expires = nil
        #expect(try PackageStatement(text: Array(noExpiry.text.utf8)) == noExpiry)
    }

    @Test("Any other line, order or spelling is malformed")
    func statementVariants() {
        let text = statement.text
        let lines = text.split(separator: "\n").map(String.init)
        var variants = [
            text.replacingOccurrences(of: "archive-size 1234", with: "archive-size 01234"),
            text.replacingOccurrences(of: "product ", with: "product  "),
            text.replacingOccurrences(of: "abab", with: "ABAB"),
            text.replacingOccurrences(of: "2027-06-01T00:00:00Z", with: "2027-06-01"),
            text.replacingOccurrences(of: "hcpack package v1", with: "hcpack package v2"),
            text + "extra line\n", String(text.dropLast()),
        ]
        var swapped = lines
        swapped.swapAt(1, 2)
        variants.append(swapped.joined(separator: "\n") + "\n")
        for variant in variants {
            #expect(throws: NoteFormatError.self, "\(variant)") { try PackageStatement(text: Array(variant.utf8)) }
        }
    }

    @Test("--expires: UTC times, dates and durations")
    func expiry() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        #expect(PackageStatement.expiry("90d", now: now) == Date(timeIntervalSince1970: 1_000_000 + 90 * 86_400))
        #expect(PackageStatement.expiry("12h", now: now) == Date(timeIntervalSince1970: 1_000_000 + 12 * 3600))
        #expect(PackageStatement.expiry("2027-06-01T00:00:00Z", now: now) == Date(timeIntervalSince1970: 1_811_808_000))
        #expect(PackageStatement.expiry("2027-06-01", now: now) == Date(timeIntervalSince1970: 1_811_808_000))
        for bad in ["", "d", "-3d", "3y", "2027-13-01T00:00:00Z", "2027-06-01T00:00:00+01:00", "99999999999999999d"] {
            #expect(PackageStatement.expiry(bad, now: now) == nil, "\(bad)")
        }
    }
}
