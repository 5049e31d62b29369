import Foundation
import TestSupport
import Testing

@testable import HostedContent

/// The seven holes an outside review found in signing and the catalog (issue 25), one test each.
@Suite("Signing and the catalog hold against the outside review's attacks", .serialized)
struct ReviewHoleTests {
    @Test("--trusted-key: a key line is the key even when a file of that name holds another key; FILE.pub still works")
    func keyLineNotAPath() throws {
        let bench = SigningBench()
        bench.key("a")
        let b = bench.key("b")
        #expect(bench.sign(b).status == 0)
        let lineA = String(decoding: bench.folder.read("a.pem.pub") ?? [], as: UTF8.self).trimmingCharacters(in: .newlines)
        let lineB = String(decoding: bench.folder.read("b.pem.pub") ?? [], as: UTF8.self)
        // The attacker's file, named as key A's line (a relative path: its '/' make folders), holds key B.
        let work = bench.folder.url("work")
        let planted = work + "/" + lineA
        try FileManager.default.createDirectory(
            atPath: (planted as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: planted, contents: Data(lineB.utf8)))
        let keys = try VerifierKey.load(lineA, relativeTo: work)
        #expect(keys.map(\.line) == [lineA])
        let verify = hcpack(["verify", bench.archive, "--trusted-key", lineA], in: work)
        #expect(verify.status == 1 && verify.stdout.contains("[signature.untrusted]"), "\(verify.stdout)")
        let install = hcpack(["install", bench.archive, "--dest", bench.dest, "--trusted-key", lineA], in: work)
        #expect(install.status == 1)
        // A .pub file, relative or absolute, is read as before.
        #expect(hcpack(["verify", bench.archive, "--trusted-key", "b.pem.pub"], in: bench.folder.path).status == 0)
        #expect(hcpack(["verify", bench.archive, "--trusted-key", bench.pub("b")]).status == 0)
    }

    /// A signed package without Files, and an archive of the same package with one more file.
    static func unlistedBench() throws -> (SigningBench, evil: String) {
        let bench = SigningBench()
        var package = PackageArchive(version: "1.0")
        package.filesKey = false
        // Records for the package's own files only: the evil archive's plist is the same, its file unrecorded.
        package.recordsWithoutFiles = true
        package.listed = package.files.map(\.0)
        package.write(to: bench.archive)
        let evil = bench.folder.url("evil.zip")
        package.files.append(("evil.txt", Array("not signed\n".utf8)))
        package.write(to: evil)
        let key = bench.key("a")
        let signed = bench.sign(key)
        try #require(signed.status == 0, "\(signed.stderr)")
        return (bench, evil)
    }

    @Test(
        "A signed package without Files replaced after the hash check is refused by install and verify", arguments: [false, true])
    func swappedArchive(inPlace: Bool) throws {
        let (bench, evil) = try Self.unlistedBench()
        let archive = bench.archive
        SignedArchiveRead.afterCheck.withLock {
            $0 = { path in
                guard path == archive else { return }
                if inPlace {
                    // The same file (inode), rewritten: what a writer of the file itself can do.
                    guard let handle = FileHandle(forWritingAtPath: path), let bytes = FileManager.default.contents(atPath: evil)
                    else { return }
                    try? handle.truncate(atOffset: 0)
                    handle.write(bytes)
                    try? handle.close()
                } else {
                    _ = rename(evil, path)  // what a writer of the folder can do
                }
            }
        }
        defer { SignedArchiveRead.afterCheck.withLock { $0 = nil } }
        let good = try #require(bench.folder.read("rel.zip"))
        let before = treeListing(bench.dest)
        let install = hcpack(["install", archive, "--dest", bench.dest, "--trusted-key", bench.pub("a")])
        #expect(install.status == 1 && install.stdout.contains("[signature.mismatch]"), "\(install.stdout)\(install.stderr)")
        #expect(treeListing(bench.dest) == before)

        bench.folder.write("rel.zip", good)
        rewriteEvil(evil)
        let verify = hcpack(["verify", archive, "--trusted-key", bench.pub("a")])
        #expect(verify.status == 1 && verify.stdout.contains("[signature.mismatch]"), "\(verify.stdout)")

        // Left alone, the same release installs.
        bench.folder.write("rel.zip", good)
        SignedArchiveRead.afterCheck.withLock { $0 = nil }
        #expect(hcpack(["install", archive, "--dest", bench.dest, "--trusted-key", bench.pub("a")]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: bench.dest + "/evil.txt"))
    }

    /// Puts the evil archive back (the first swap renamed it away).
    private func rewriteEvil(_ evil: String) {
        var package = PackageArchive(version: "1.0")
        package.filesKey = false
        package.recordsWithoutFiles = true
        package.listed = package.files.map(\.0)
        package.files.append(("evil.txt", Array("not signed\n".utf8)))
        package.write(to: evil)
    }

    @Test("verify-catalog checks the note and the SHA-256 before parsing: a 60 MiB catalog with a wrong note is refused unparsed")
    func largeCatalogWrongNote() throws {
        let bench = CatalogBench()
        #expect(bench.make(["--sign-key", bench.key]).status == 0)
        // 60 MiB of JSON that is no catalog: parsing it would be a finding of its own.
        var big = Array(#"{"format":"hcpack-catalog-1","serial":7,"packages":["#.utf8)
        let item = Array(#""aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","#.utf8)
        big.reserveCapacity(60 << 20)
        while big.count < 60 << 20 { big += item }
        big += Array(#""x"]}"#.utf8)
        bench.corpus.folder.write("catalog.json", big)
        let policy = CatalogPolicy(trustedKeys: try VerifierKey.load(bench.pub, relativeTo: "/"))
        let result = try CatalogVerifier.verify(bench.catalog, policy: policy)
        #expect(
            result.problems.count == 1 && result.problems.first?.contains("is not the catalog signed in") == true,
            "\(result.problems)")
        #expect(result.catalog == nil)
        // An untrusted note: refused before the catalog is even hashed.
        let other = bench.corpus.folder.url("other.key")
        #expect(hcpack(["keygen", "--name", "example.com/other", "-o", other]).status == 0)
        let untrusted = CatalogVerifier.verify(
            catalog: big, note: try #require(bench.corpus.folder.read("catalog.json.hcsig")),
            policy: CatalogPolicy(trustedKeys: try VerifierKey.load(other + ".pub", relativeTo: "/")))
        #expect(untrusted.problems.count == 1 && untrusted.problems.first?.contains("none of them a trusted key") == true)
    }

    @Test(
        "CatalogVerifier.verify(catalog:note:policy:) accepts the signed bytes and refuses a signed catalog with a repeated key")
    func catalogBytesAPI() throws {
        let bench = CatalogBench()
        #expect(bench.make(["--sign-key", bench.key]).status == 0)
        let bytes = try #require(bench.corpus.folder.read("catalog.json"))
        let note = try #require(bench.corpus.folder.read("catalog.json.hcsig"))
        let policy = CatalogPolicy(trustedKeys: try VerifierKey.load(bench.pub, relativeTo: "/"), minimumSerial: 7)
        let accepted = CatalogVerifier.verify(catalog: bytes, note: note, policy: policy)
        #expect(accepted.isValid && accepted.catalog?.serial == 7, "\(accepted.problems)")

        // A validly signed catalog whose JSON repeats "serial": two meanings for one signature.
        let text = String(decoding: bytes, as: UTF8.self).replacingOccurrences(
            of: "\"serial\" : 7,", with: "\"serial\" : 7, \"serial\" : 99,")
        let repeated = Array(text.utf8)
        let key = try SigningKey.load(bench.key, name: nil, environment: [:], relativeTo: "/")
        let statement = CatalogStatement(catalogSHA256: sha256Hex(repeated), serial: 7, expires: nil)
        let signedNote = SignedNote(text: Array(statement.text.utf8), signatures: [try key.sign(Array(statement.text.utf8))])
            .encoded()
        let refused = CatalogVerifier.verify(catalog: repeated, note: signedNote, policy: policy)
        #expect(!refused.isValid && refused.problems.first?.contains("appears twice") == true, "\(refused.problems)")
        bench.corpus.folder.write("catalog.json", repeated)
        bench.corpus.folder.write("catalog.json.hcsig", signedNote)
        #expect(bench.verify().status == 1)
    }

    @Test("catalog --serial 2^63-1 round-trips through verify-catalog")
    func maximalSerial() throws {
        let bench = CatalogBench()
        let made = bench.make(["--sign-key", bench.key], serial: Int(Int64.max))
        #expect(made.status == 0, "\(made.stderr)")
        let verified = bench.verify(["--min-serial", String(Int64.max), "--json"])
        #expect(verified.status == 0, "\(verified.stdout)")
        #expect(verified.stdout.contains("\"serial\": 9223372036854775807"), "\(verified.stdout)")
        #expect(try Catalog.decode(try #require(bench.corpus.folder.read("catalog.json"))).serial == .max)
    }

    @Test("Notes as Go's note.Open reads them: an NFD name for an NFC key and extra base64 padding are refused by both")
    func goStrictness() throws {
        try #require(SigningInteropTests.hasGo, "Go or golang.org/x/mod is missing: run make deps")
        let bench = SigningBench()
        let nfc = "example.com/caf\u{e9}"
        let key = bench.folder.url("c.pem")
        #expect(hcpack(["keygen", "--name", nfc, "-o", key]).status == 0)
        #expect(bench.sign(key).status == 0)
        let line = String(decoding: bench.folder.read("c.pem.pub") ?? [], as: UTF8.self).trimmingCharacters(in: .newlines)
        let binary = try SigningInteropTests.buildNoteCheck(in: bench.folder)
        let good = try #require(bench.folder.read("rel.zip.hcsig"))
        #expect(runWithInput(binary, ["verify", line], input: good).status == 0)
        #expect(hcpack(["verify", bench.archive, "--trusted-key", line]).status == 0)

        // The same signature under the name's NFD spelling.
        var note = try SignedNote.parse(good)
        note.signatures[0].name = "example.com/cafe\u{301}"
        let nfd = note.encoded()
        #expect(nfd != good)
        let goNFD = runWithInput(binary, ["verify", line], input: nfd)
        #expect(goNFD.status == 1 && goNFD.output.contains("no verifiable signatures"), "\(goNFD.output)")
        bench.writeNote(nfd)
        let ours = hcpack(["verify", bench.archive, "--trusted-key", line])
        #expect(ours.status == 1 && ours.stdout.contains("[signature.untrusted]"), "\(ours.stdout)")

        // Extra padding on the signature: malformed for Go and for hcpack.
        let text = String(decoding: good, as: UTF8.self)
        let padded = Array((text.dropLast() + "====\n").utf8)
        let goPadded = runWithInput(binary, ["verify", line], input: padded)
        #expect(goPadded.status == 1 && goPadded.output.contains("malformed"), "\(goPadded.output)")
        #expect(throws: NoteFormatError.self) { try SignedNote.parse(padded) }
        bench.writeNote(padded)
        let oursPadded = hcpack(["verify", bench.archive, "--trusted-key", line])
        #expect(oursPadded.status == 1 && oursPadded.stdout.contains("[signature.malformed]"), "\(oursPadded.stdout)")

        // Extra padding on the key line: Go's NewVerifier refuses it, and so does --trusted-key.
        bench.writeNote(good)
        #expect(runWithInput(binary, ["verify", line + "===="], input: good).status == 2)
        #expect(throws: HCPackError.self) { try VerifierKey(line: line + "====") }
        #expect(hcpack(["verify", bench.archive, "--trusted-key", line + "===="]).status == 2)
    }

    @Test(
        "--force never lets another product's archive, signed or not, overwrite files a receipt records",
        arguments: [true, false])
    func forceAcrossProducts(signed: Bool) throws {
        let bench = SigningBench()
        let key = bench.key("a")
        #expect(bench.sign(key).status == 0)
        var trust = ["--trusted-key", bench.pub("a")]
        #expect(hcpack(["install", bench.archive, "--dest", bench.dest] + trust).status == 0)
        // Another product's release, validly signed by the same key, renamed like the first product's.
        var other = PackageArchive(version: "9.0", files: [("index.json", "{\"title\": \"Other\"}\n")])
        other.product = "com.example.other"
        let renamed = bench.folder.url("levels-2.0.zip")
        other.write(to: renamed)
        if signed { #expect(hcpack(["sign", renamed, "--key", key]).status == 0) } else { trust = [] }
        let before = treeListing(bench.dest)
        let index = try #require(bench.folder.read("dest/index.json"))
        let install = hcpack(["install", renamed, "--dest", bench.dest, "--force"] + trust)
        #expect(install.status == 1, "\(install.stdout)\(install.stderr)")
        #expect(
            install.stderr.contains("belongs to 'com.example.levels'") && install.stderr.contains("'com.example.other'"),
            "\(install.stderr)")
        #expect(treeListing(bench.dest) == before && bench.folder.read("dest/index.json") == index)
    }
}
