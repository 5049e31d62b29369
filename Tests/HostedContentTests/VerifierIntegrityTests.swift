import Digest
import HostedContent
import TestSupport
import Testing

/// A plist body recording size and SHA-256 of each sample file, with optional overrides.
func integrityXML(_ files: [(String, String)], size: [String: Int] = [:], digest: [String: String] = [:]) -> String {
    var xml = "<key>HCPackIntegrity</key><dict>"
    for (path, text) in files {
        let bytes = Array(text.utf8)
        xml += "<key>\(xmlEscape(path))</key><dict><key>Size</key><integer>\(size[path] ?? bytes.count)</integer>"
        xml += "<key>SHA256</key><string>\(digest[path] ?? Hasher.digest(.sha256, of: bytes).hexString)</string></dict>"
    }
    return xml + "</dict>"
}

@Suite("verify: recorded sizes and digests")
struct VerifierIntegrityTests {
    @Test("Matching records verify clean, in a folder and in a zip")
    func matching() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg", extraKeys: integrityXML(sampleFiles))
        #expect(try Verifier.verify(folder.url("pkg")).problems.problems.isEmpty)
        zipFolder(folder.url("pkg"), to: folder.url("pkg.zip"))
        let report = try Verifier.verify(folder.url("pkg.zip"))
        #expect(report.problems.problems.isEmpty, "\(report.problems.problems)")
    }

    @Test("A changed file is caught by size or digest")
    func tampered() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg", extraKeys: integrityXML(sampleFiles))
        folder.write("pkg/Contents/levels/1.json", "{\"level\": 9}\n")  // same size, other bytes
        folder.write("pkg/Contents/levels/2.json", "{\"level\": 22}\n")  // other size
        let report = try Verifier.verify(folder.url("pkg"))
        #expect(report.problems.problems.contains { $0.rule == .digestMismatch && $0.path == "Contents/levels/1.json" })
        #expect(report.problems.problems.contains { $0.rule == .sizeMismatch && $0.path == "Contents/levels/2.json" })
        zipFolder(folder.url("pkg"), to: folder.url("pkg.zip"))
        let archived = try Verifier.verify(folder.url("pkg.zip")).problems.rules
        #expect(archived.isSuperset(of: [.digestMismatch, .sizeMismatch]))
    }

    @Test("Malformed, missing and stray records are reported")
    func recordShape() throws {
        let malformed = TemporaryFolder()
        writeValidPackage(in: malformed, extraKeys: integrityXML(sampleFiles, digest: ["index.json": "not-hex"]))
        #expect(try Verifier.verify(malformed.path).problems.rules.contains(.integrityMalformed))

        let partial = TemporaryFolder()
        writeValidPackage(in: partial, extraKeys: integrityXML(Array(sampleFiles.dropFirst())))
        let missing = try Verifier.verify(partial.path).problems.problems
        #expect(missing.contains { $0.rule == .integrityMissingRecord && $0.path == "Contents/index.json" })

        let stray = TemporaryFolder()
        writeValidPackage(in: stray, extraKeys: integrityXML(sampleFiles + [("gone.json", "x")]))
        #expect(try Verifier.verify(stray.path).problems.rules == [.integrityStrayRecord])
    }

    @Test("Records out of Files order, or spelled in another normalization, are found; only the stray is reported")
    func recordOrder() throws {
        let nfd = sampleFiles.map { ($0.0 == "art/Caf\u{e9}.txt" ? "art/Cafe\u{301}.txt" : $0.0, $0.1) }
        for order in [nfd, nfd.reversed()] {
            let folder = TemporaryFolder()
            writeValidPackage(in: folder, root: "pkg", extraKeys: integrityXML(order.prefix(2) + [("gone.json", "x")] + order.dropFirst(2)))
            zipFolder(folder.url("pkg"), to: folder.url("pkg.zip"))
            for path in [folder.url("pkg"), folder.url("pkg.zip")] {
                let problems = try Verifier.verify(path).problems.problems
                #expect(problems.map(\.rule) == [.integrityStrayRecord] && problems.map(\.path) == ["Contents/gone.json"], "\(problems)")
            }
        }
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg", extraKeys: integrityXML(nfd.reversed()))
        folder.write("pkg/Contents/levels/1.json", "{\"level\": 9}\n")
        folder.write("pkg/Contents/art/Caf\u{e9}.txt", "non-ASCII mane\n")
        let problems = try Verifier.verify(folder.url("pkg")).problems.problems
        #expect(Set(problems.map { "\($0.rule.rawValue) \($0.path)" }) == [
            "\(Rule.digestMismatch.rawValue) Contents/levels/1.json", "\(Rule.digestMismatch.rawValue) Contents/art/Caf\u{e9}.txt",
        ])
    }
}
