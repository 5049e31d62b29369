import Foundation
import HostedContent
import TestSupport
import Testing

/// Two products' releases, a delta, a key, and a catalog of them.
struct CatalogBench {
    let corpus = DeltaCorpus()
    let v1: String, v2: String, delta: String, other: String
    let key: String
    var pub: String { key + ".pub" }
    var catalog: String { corpus.folder.url("catalog.json") }

    init() {
        (v1, v2) = corpus.standard()
        delta = corpus.folder.url("l-1.0-1.1.zip")
        #expect(hcpack(["delta", v1, v2, "-o", delta]).status == 0)
        other = corpus.folder.url("other-2.0.tgz")
        var package = PackageArchive(format: .tgz, version: "2.0", files: [("a.txt", "a\n")])
        package.product = "com.example.art"
        _ = package.write(to: other)
        key = corpus.folder.url("k.key")
        #expect(hcpack(["keygen", "--name", "example.com/catalog", "-o", key]).status == 0)
        #expect(hcpack(["sign", v2, "--key", key, "-q"]).status == 0)
    }

    @discardableResult
    func make(_ extra: [String] = [], serial: Int = 7) -> (status: Int32, stdout: String, stderr: String) {
        hcpack(makeArguments(extra, serial: serial))
    }

    func makeArguments(_ extra: [String] = [], serial: Int = 7) -> [String] {
        ["catalog", v1, v2, delta, other, "--base-url", "https://cdn.example.com/r/", "-o", catalog, "--serial", String(serial)]
            + extra
    }

    func verify(_ extra: [String] = []) -> (status: Int32, stdout: String, stderr: String) {
        hcpack(["verify-catalog", catalog, "--trusted-key", pub] + extra)
    }
}

@Suite("hcpack catalog and verify-catalog")
struct CatalogCommandTests {
    @Test("--policy records a download policy per product; a bad or unknown one is refused")
    func policy() throws {
        let bench = CatalogBench()
        let made = bench.make(["--policy", "com.example.art=essential", "--policy", "com.example.levels=prefetch"])
        #expect(made.status == 0, "\(made.stderr)")
        let bytes = try #require(bench.corpus.folder.read("catalog.json"))
        let catalog = try Catalog.decode(bytes)
        #expect(catalog.packages.map(\.policy) == [.essential, .prefetch])
        #expect(catalog.encoded() == bytes)
        #expect(bench.make(["--policy", "com.example.art=sometimes"]).status == 2)
        #expect(bench.make(["--policy", "com.example.art=essential", "--policy", "com.example.art=prefetch"]).status == 2)
        let unknown = bench.make(["--policy", "com.example.nope=essential"])
        #expect(unknown.status == 2 && unknown.stderr.contains("com.example.nope"), "\(unknown.stderr)")
    }

    @Test("catalog verifies its archives with the limit flags verify takes: a --max-size below their content refuses them")
    func limits() throws {
        let bench = CatalogBench()
        let refused = bench.make(["--max-size", "10"])
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(bench.corpus.folder.read("catalog.json") == nil)
        #expect(bench.make(["--max-size", "\(Int64(1) << 40)"]).status == 0)
        #expect(bench.make(["--max-ratio", "0.5"]).status == 2)
    }

    @Test("A catalog lists each product's newest archive with its deltas, deterministically, and verifies")
    func roundTrip() throws {
        let bench = CatalogBench()
        let made = bench.make(["--expires", "2099-01-01", "--sign-key", bench.key])
        #expect(made.status == 0, "\(made.stderr)")
        let bytes = try #require(bench.corpus.folder.read("catalog.json"))
        let catalog = try Catalog.decode(bytes)
        #expect(catalog.serial == 7 && catalog.packages.map(\.productIdentifier) == ["com.example.art", "com.example.levels"])
        let levels = catalog.packages[1]
        #expect(levels.version == "1.1" && levels.url == "https://cdn.example.com/r/l-1.1.zip")
        #expect(levels.signatureURL == "https://cdn.example.com/r/l-1.1.zip.hcsig" && catalog.packages[0].signatureURL == nil)
        #expect(levels.size == Int64(bench.corpus.folder.read("l-1.1.zip")?.count ?? -1))
        #expect(levels.sha256 == sha256Hex(bench.corpus.folder.read("l-1.1.zip") ?? []))
        // The base plist's SHA-256 is the one the delta itself names (what a receipt of 1.0 records).
        let deltaReport = jsonObject(hcpack(["verify", bench.delta, "--json"]).stdout)?["delta"] as? [String: Any]
        let basePlist = try #require(deltaReport?["basePlistSHA256"] as? String)
        #expect(levels.deltas == [
            CatalogDelta(baseVersion: "1.0", url: "https://cdn.example.com/r/l-1.0-1.1.zip",
                size: Int64(bench.corpus.folder.read("l-1.0-1.1.zip")?.count ?? -1), sha256: sha256Hex(bench.corpus.folder.read("l-1.0-1.1.zip") ?? []),
                basePlistSHA256: basePlist)
        ])
        #expect(catalog.packages.allSatisfy { $0.policy == .onDemand } && !String(decoding: bytes, as: UTF8.self).contains("policy"))
        #expect(catalog.encoded() == bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("{\n  \"format\" : \"hcpack-catalog-1\",\n  \"serial\" : 7,\n  \"expires\" : \"2099-01-01T00:00:00Z\""))
        let note = String(decoding: bench.corpus.folder.read("catalog.json.hcsig") ?? [], as: UTF8.self)
        #expect(note.hasPrefix("hcpack catalog v1\ncatalog-sha256 \(sha256Hex(bytes))\nserial 7\nexpires 2099-01-01T00:00:00Z\n\n\u{2014} example.com/catalog "))

        let verified = bench.verify(["--min-serial", "7", "--json"])
        #expect(verified.status == 0, "\(verified.stdout)")
        #expect(jsonObject(verified.stdout)?["serial"] as? Int == 7)
        // The same inputs: the same bytes.
        #expect(bench.make(["--expires", "2099-01-01", "--sign-key", bench.key]).status == 0)
        #expect(bench.corpus.folder.read("catalog.json") == bytes)
    }

    @Test("verify-catalog refuses a tampered, expired, lower-serial, unsigned or wrongly signed catalog")
    func refusals() throws {
        let bench = CatalogBench()
        #expect(bench.make(["--sign-key", bench.key]).status == 0)
        #expect(bench.verify().status == 0)
        let original = try #require(bench.corpus.folder.read("catalog.json"))

        let lower = bench.verify(["--min-serial", "8"])
        #expect(lower.status == 1 && lower.stdout.contains("lower than 8"))

        var tampered = original
        let index = try #require(tampered.firstIndex(of: UInt8(ascii: "7")))
        tampered[index] = UInt8(ascii: "9")  // serial 7 -> 9: still a well-formed catalog
        bench.corpus.folder.write("catalog.json", tampered)
        let changed = bench.verify()
        #expect(changed.status == 1 && changed.stdout.contains("changed after signing"), "\(changed.stdout)")
        bench.corpus.folder.write("catalog.json", original)

        var note = try #require(bench.corpus.folder.read("catalog.json.hcsig"))
        note[25] ^= 0x01  // inside the signed text
        bench.corpus.folder.write("catalog.json.hcsig", note)
        #expect(bench.verify().status == 1)

        // Expired: signed with an expiry that has passed by the time an app checks (a fixed clock here).
        #expect(bench.make(["--sign-key", bench.key, "--expires", "2030-01-01"]).status == 0)
        let keys = try VerifierKey.load(bench.pub, relativeTo: "/")
        let later = try CatalogVerifier.verify(
            bench.catalog, policy: CatalogPolicy(trustedKeys: keys, now: Date(timeIntervalSince1970: 1_900_000_000)))
        #expect(!later.isValid && later.problems.contains { $0.contains("expired") })
        #expect(try CatalogVerifier.verify(bench.catalog, policy: CatalogPolicy(trustedKeys: keys)).isValid)

        bench.corpus.folder.remove("catalog.json.hcsig")
        #expect(bench.make().status == 0)
        let unsigned = bench.verify()
        #expect(unsigned.status == 1 && unsigned.stdout.contains("unsigned"))

        let otherKey = bench.corpus.folder.url("o.key")
        #expect(hcpack(["keygen", "--name", "example.com/other", "-o", otherKey]).status == 0)
        #expect(bench.make(["--sign-key", otherKey]).status == 0)
        let untrusted = bench.verify()
        #expect(untrusted.status == 1 && untrusted.stdout.contains("none of them a trusted key"))

        bench.corpus.folder.write("bad.json", "{\"format\": \"hcpack-catalog-1\", \"serial\": true, \"packages\": []}")
        #expect(hcpack(["verify-catalog", bench.corpus.folder.url("bad.json"), "--trusted-key", bench.pub]).status == 1)
        #expect(hcpack(["verify-catalog", bench.corpus.folder.url("missing.json"), "--trusted-key", bench.pub]).status == 3)
        #expect(hcpack(["verify-catalog", bench.catalog]).status == 2)
    }

    @Test("catalog refuses deltas without their full archive, and an invalid archive; nothing is written")
    func refusedInputs() throws {
        let bench = CatalogBench()
        let onlyDelta = hcpack(["catalog", bench.delta, "--base-url", "https://x/", "-o", bench.catalog, "--serial", "1"])
        #expect(onlyDelta.status == 1 && onlyDelta.stderr.contains("only deltas"))
        bench.corpus.folder.write("junk.zip", "junk")
        #expect(hcpack(["catalog", bench.corpus.folder.url("junk.zip"), "--base-url", "https://x/", "-o", bench.catalog, "--serial", "1"]).status == 1)
        #expect(!FileManager.default.fileExists(atPath: bench.catalog))
        #expect(hcpack(["catalog", "--base-url", "https://x/", "-o", bench.catalog, "--serial", "1"]).status == 2)
    }

    @Test("A signed delta gets a signatureURL, as a signed full archive does; the catalog still verifies")
    func deltaSignatureURL() throws {
        let bench = CatalogBench()
        #expect(hcpack(["sign", bench.delta, "--key", bench.key, "-q"]).status == 0)
        #expect(bench.make(["--sign-key", bench.key]).status == 0)
        let catalog = try Catalog.decode(try #require(bench.corpus.folder.read("catalog.json")))
        let levels = try #require(catalog.packages.first { $0.productIdentifier == "com.example.levels" })
        #expect(levels.deltas.map(\.signatureURL) == ["https://cdn.example.com/r/l-1.0-1.1.zip.hcsig"])
        #expect(bench.verify().status == 0)
    }

    @Test("Two different builds of a product's newest version are refused, whatever their order; one file given twice is not")
    func twoBuildsOfOneVersion() throws {
        let bench = CatalogBench()
        let again = bench.corpus.build("l-1.1-again.zip", version: "1.1", files: DeltaCorpus.v2 + [("extra.txt", "x\n")])
        for archives in [[bench.v2, again], [again, bench.v2]] {
            let made = hcpack(["catalog"] + archives + ["--base-url", "https://x/", "-o", bench.catalog, "--serial", "1"])
            #expect(made.status == 1 && made.stderr.contains("two different builds"), "\(made.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: bench.catalog))
        #expect(hcpack(["catalog", bench.v2, bench.v2, "--base-url", "https://x/", "-o", bench.catalog, "--serial", "1"]).status == 0)
    }

    @Test("Go's sumdb/note verifies the catalog's signature, as it does package notes")
    func goInterop() throws {
        let bench = CatalogBench()
        #expect(bench.make(["--sign-key", bench.key]).status == 0)
        let binary = try SigningInteropTests.buildNoteCheck(in: bench.corpus.folder)
        let line = String(decoding: bench.corpus.folder.read("k.key.pub") ?? [], as: UTF8.self).trimmingCharacters(in: .newlines)
        let note = try #require(bench.corpus.folder.read("catalog.json.hcsig"))
        let checked = runWithInput(binary, ["verify", line], input: note)
        #expect(checked.status == 0, "\(checked.output)")
        #expect(checked.output.hasPrefix("hcpack catalog v1\ncatalog-sha256 "))
        var tampered = note
        tampered[30] ^= 0x01
        #expect(runWithInput(binary, ["verify", line], input: tampered).status == 1)
    }
}
