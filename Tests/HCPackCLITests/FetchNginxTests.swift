import Foundation
import HostedContent
import TestSupport
import Testing

/// Whether a cancelled fetch let go of DIR: its bookkeeping lock can be taken again.
enum FetchKept {
    static func released(_ destination: String) -> Bool {
        guard let folder = try? DirectoryHandle.open(destination + "/.hcpack/fetch"),
            case .acquired(let lock)? = try? LockFile.acquire("lock", in: folder, wait: false)
        else { return false }
        lock.release()
        return true
    }
}

/// `hcpack fetch` against a real nginx on a loopback port, plain and TLS (docs/fetch.md).
@Suite struct FetchNginxTests {
    func fetch(_ arguments: [String]) -> (status: Int32, stdout: String, stderr: String) {
        hcpack(["fetch"] + arguments)
    }

    /// A folder with `archives` installed by hcpack install, for comparing with what fetch left.
    func direct(_ corpus: FetchCorpus, _ archives: [String], name: String) -> [String: String] {
        corpus.snapshot(corpus.installed(archives, into: name))
    }

    /// The usual start: levels 1.0, 1.1 and their delta, nginx over `www/`, and (unless empty) `archives` in
    /// its catalog at `serial`; the catalog's URL.
    func release(_ archives: [String] = [], serial: Int = 1) throws -> (corpus: FetchCorpus, nginx: Nginx, url: String) {
        let corpus = FetchCorpus()
        corpus.standard()
        let nginx = try #require(Nginx(root: corpus.www, folder: corpus.folder))
        if !archives.isEmpty { corpus.publish(archives, baseURL: nginx.base, serial: serial) }
        return (corpus, nginx, nginx.base + "/catalog.json")
    }

    @Test("first install, an upgrade through the delta, then an up-to-date rerun that downloads only the catalog")
    func installUpgradeRerun() throws {
        let (corpus, nginx, url) = try release(["levels-1.0.zip"])
        let dest = corpus.destination("app")

        let nothing = fetch([url, "--trusted-key", corpus.pub, "--dest", dest])
        #expect(nothing.status == 2 && nothing.stderr.contains("pass --product ID (the catalog offers: com.example.levels 1.0 (onDemand))"), "\(nothing.stderr)")
        #expect(corpus.snapshot(dest).isEmpty && !FileManager.default.fileExists(atPath: dest + "/.hcpack"))

        let first = fetch([url, "--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels", "--json"])
        #expect(first.status == 0, "\(first.stderr)")
        let firstReport = try #require(jsonObject(first.stdout)?["products"] as? [[String: Any]])
        #expect(firstReport.first?["status"] as? String == "installed" && firstReport.first?["method"] as? String == "full")
        #expect(corpus.snapshot(dest) == direct(corpus, ["levels-1.0.zip"], name: "direct-1.0"))

        corpus.publish(["levels-1.0.zip", "levels-1.1.zip", "levels-1.0-1.1.zip"], baseURL: nginx.base, serial: 2)
        let upgrade = fetch([url, "--trusted-key", corpus.pub, "--dest", dest, "--json"])
        #expect(upgrade.status == 0, "\(upgrade.stderr)")
        let product = try #require((jsonObject(upgrade.stdout)?["products"] as? [[String: Any]])?.first)
        #expect(product["method"] as? String == "delta" && product["fromVersion"] as? String == "1.0" && product["toVersion"] as? String == "1.1")
        #expect((product["downloadedBytes"] as? NSNumber)?.int64Value == corpus.size("levels-1.0-1.1.zip"))
        #expect(corpus.snapshot(dest) == direct(corpus, ["levels-1.1.zip"], name: "direct-1.1"))
        #expect(corpus.partials(dest).isEmpty)
        // The receipt names the catalog the version came from; install's receipt does not.
        let catalog = try #require(corpus.receiptCatalog(dest))
        #expect((catalog["serial"] as? NSNumber)?.int64Value == 2)
        let signers = try #require(catalog["signers"] as? [[String: Any]])
        #expect(signers.count == 1 && signers.first?["name"] as? String == "example.com/release")
        #expect(corpus.receiptCatalog(corpus.folder.url("direct-1.1")) == nil)
        #expect(!FileManager.default.fileExists(atPath: dest + "/.hcpack/fetch/installed-com.example.levels.json"))
        let inspected = hcpack(["inspect", dest])
        #expect(inspected.stdout.contains("Catalog:    serial 2, signed by example.com/release ("), "\(inspected.stdout)")

        let before = nginx.requests().count
        let rerun = fetch([url, "--trusted-key", corpus.pub, "--dest", dest])
        #expect(rerun.status == 0 && rerun.stdout.contains("up to date"), "\(rerun.stderr)")
        let rerunRequests = nginx.requests().dropFirst(before).map(\.uri)
        #expect(rerunRequests == ["/catalog.json.hcsig", "/catalog.json"])
    }

    @Test("--json and --progress json match docs/schemas (fetch, fetch-progress): installed, through a delta, up to date, refused")
    func machineInterface() throws {
        let (corpus, nginx, url) = try release(["levels-1.0.zip"])
        let dest = corpus.destination("app")
        let validator = JSONSchemaValidator(folder: JSONSchemaTests.schemas)

        /// Every stderr line of `--progress json` is one object the progress schema allows; returns their events.
        func events(_ arguments: [String], status: Int32) throws -> [String] {
            let result = fetch(arguments + ["--progress", "json"])
            #expect(result.status == status, "\(result.stderr)")
            var names: [String] = []
            for line in result.stderr.split(separator: "\n") {
                let event = try JSONDocument.parse(String(line))
                #expect(try validator.validate(event, against: "fetch-progress.schema.json").isEmpty, "\(line)")
                if case .string(let name)? = event["event"] { names.append(name) }
            }
            return names
        }

        let first = try JSONSchemaTests.conforms(["fetch", url, "--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels", "--json"], status: 0)
        /// The products' statuses in a report.
        func statuses(_ report: JSONDocument) -> [JSONDocument?] {
            guard case .array(let products)? = report["products"] else { return [] }
            return products.map { $0["status"] }
        }
        #expect(statuses(first) == [.string("installed")])
        corpus.publish(["levels-1.0.zip", "levels-1.1.zip", "levels-1.0-1.1.zip"], baseURL: nginx.base, serial: 2)
        let upgrade = try events([url, "--trusted-key", corpus.pub, "--dest", dest], status: 0)
        #expect(upgrade.first == "catalog" && upgrade.contains("downloading") && upgrade.last == "installed", "\(upgrade)")
        let current = try JSONSchemaTests.conforms(["fetch", url, "--trusted-key", corpus.pub, "--dest", dest, "--json"], status: 0)
        #expect(statuses(current) == [.string("upToDate")])
        // inspect DIR --json: the receipt's catalog, in the inspect schema.
        let inspected = try JSONSchemaTests.conforms(["inspect", dest, "--json"], status: 0)
        var receipts: [JSONDocument] = []
        if case .array(let items)? = inspected["receipts"] { receipts = items }
        #expect(receipts.count == 1 && receipts.first?["catalog"]?["serial"] == .integer(2), "\(inspected)")
        #expect(try events([url, "--trusted-key", corpus.pub, "--dest", dest], status: 0).last == "up-to-date")
        // Refused before any product is looked at: the error object.
        #expect(hcpack(["keygen", "--name", "example.com/other", "-o", corpus.folder.url("other.key")]).status == 0)
        let refused = try JSONSchemaTests.conforms(
            ["fetch", url, "--trusted-key", corpus.folder.url("other.key.pub"), "--dest", dest, "--json"], status: 1)
        #expect(refused["error"]?["code"] != nil)
    }

    @Test("a refused delta falls back to the full archive in the same run, replacing edited files it installed; a file it did not install needs --repair")
    func fallback() throws {
        let (corpus, nginx, url) = try release(["levels-1.0.zip", "levels-1.1.zip", "levels-1.0-1.1.zip"], serial: 3)
        let expected = direct(corpus, ["levels-1.1.zip"], name: "direct")

        // A file the delta does not carry went missing: the delta is refused, the full archive restores it.
        let missing = corpus.installed(["levels-1.0.zip"], into: "missing")
        corpus.folder.remove("missing/levels/2.json")
        let result = fetch([url, "--trusted-key", corpus.pub, "--dest", missing, "--progress", "json"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("the delta from 1.0 was refused") && result.stderr.contains("\"event\":\"fallback\""))
        #expect(corpus.snapshot(missing) == expected)
        let archives = nginx.requests().map(\.uri).filter { $0.hasSuffix(".zip") }
        #expect(archives == ["/levels-1.0-1.1.zip", "/levels-1.1.zip"])

        // An edited file this product installed: the delta is refused, and the full archive replaces it, saying so.
        let edited = corpus.installed(["levels-1.0.zip"], into: "edited")
        corpus.folder.write("edited/levels/2.json", "mine\n")
        let replaced = fetch([url, "--trusted-key", corpus.pub, "--dest", edited])
        #expect(replaced.status == 0, "\(replaced.stderr)")
        #expect(replaced.stdout.contains("installed the full archive instead"), "\(replaced.stdout)")
        #expect(replaced.stdout.contains("replaced 1 changed file(s) this product installed: levels/2.json"), "\(replaced.stdout)")
        #expect(corpus.snapshot(edited) == expected)

        // A file hcpack did not install in the way (levels/3.json is new in 1.1): refused, DIR as it was, until
        // --repair, which replaces it.
        let foreign = corpus.installed(["levels-1.0.zip"], into: "foreign")
        corpus.folder.write("foreign/levels/2.json", "mine\n")
        corpus.folder.write("foreign/levels/3.json", "the user's\n")
        let before = corpus.snapshot(foreign)
        let refused = fetch([url, "--trusted-key", corpus.pub, "--dest", foreign])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("levels/3.json") && refused.stderr.contains("--repair"), "\(refused.stderr)")
        #expect(corpus.snapshot(foreign) == before)
        let repaired = fetch([url, "--trusted-key", corpus.pub, "--dest", foreign, "--repair"])
        #expect(repaired.status == 0, "\(repaired.stderr)")
        #expect(corpus.snapshot(foreign) == expected)
        // The full archive was downloaded once per folder: the refused run's verified copy was kept and reused.
        #expect(nginx.requests().filter { $0.uri == "/levels-1.1.zip" }.count == 3)
    }

    @Test("without a delta in the catalog, an upgrade replaces an edited file this product installed as the fallback does, and names it")
    func fullUpgradeOverEditedFile() throws {
        let (corpus, nginx, url) = try release(["levels-1.1.zip"], serial: 1)
        defer { withExtendedLifetime(nginx) {} }
        let expected = direct(corpus, ["levels-1.1.zip"], name: "direct")
        let edited = corpus.installed(["levels-1.0.zip"], into: "edited")
        corpus.folder.write("edited/levels/2.json", "mine\n")
        let result = fetch([url, "--trusted-key", corpus.pub, "--dest", edited])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("replaced 1 changed file(s) this product installed: levels/2.json"), "\(result.stdout)")
        #expect(corpus.snapshot(edited) == expected)
    }

    @Test("several products with --jobs: essential first, prefetch with it, onDemand only when asked; --check verifies them all")
    func jobs() throws {
        let corpus = FetchCorpus()
        corpus.build("levels-1.0.zip", version: "1.0", files: FetchCorpus.v1)
        corpus.build("art-2.0.zip", product: "com.example.art", version: "2.0", files: [("a.txt", "art\n")], big: 200_000)
        corpus.build("music-1.0.zip", product: "com.example.music", version: "1.0", files: [("m.txt", "music\n")], big: 200_000)
        corpus.build("voice-1.0.zip", product: "com.example.voice", version: "1.0", files: [("v.txt", "voice\n")])
        let nginx = try #require(Nginx(root: corpus.www, folder: corpus.folder))
        corpus.publish(
            ["levels-1.0.zip", "art-2.0.zip", "music-1.0.zip", "voice-1.0.zip"], baseURL: nginx.base, serial: 1,
            extra: ["--policy", "com.example.levels=essential", "--policy", "com.example.art=prefetch", "--policy", "com.example.music=prefetch"])
        let url = nginx.base + "/catalog.json"

        let nothing = fetch([url, "--trusted-key", corpus.pub, "--dest", corpus.destination("plain"), "--product", "com.example.nope"])
        #expect(nothing.status == 2 && nothing.stderr.contains("com.example.voice 1.0 (onDemand)"), "\(nothing.stderr)")

        let dest = corpus.destination("app")
        let result = fetch([url, "--trusted-key", corpus.pub, "--dest", dest, "--jobs", "3", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let products = try #require(jsonObject(result.stdout)?["products"] as? [[String: Any]])
        #expect(products.map { $0["productIdentifier"] as? String } == ["com.example.levels", "com.example.art", "com.example.music"])
        #expect(products.allSatisfy { $0["status"] as? String == "installed" })
        let expected = direct(corpus, ["levels-1.0.zip", "art-2.0.zip", "music-1.0.zip"], name: "direct")
        #expect(corpus.snapshot(dest) == expected)

        let asked = fetch([url, "--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.voice", "-j", "2"])
        #expect(asked.status == 0 && asked.stdout.contains("installed com.example.voice 1.0"), "\(asked.stderr)")
        #expect(asked.stdout.components(separatedBy: "up to date").count == 4)

        let check = corpus.destination("check")
        let checked = fetch([url, "--trusted-key", corpus.pub, "--check", check, "--jobs", "4"])
        #expect(checked.status == 0, "\(checked.stderr)")
        for name in ["levels-1.0.zip", "art-2.0.zip", "music-1.0.zip", "voice-1.0.zip"] {
            #expect(corpus.folder.read("check/" + name) == corpus.folder.read("www/" + name))
        }
        #expect(!FileManager.default.fileExists(atPath: check + "/.hcpack/receipts"))
    }

    @Test("TLS with a CA made by openssl: --cacert trusts it; without it, or redirected to http or file://, nothing is installed")
    func tls() throws {
        let corpus = FetchCorpus()
        corpus.standard()
        let certificates = try #require(TestCertificates(in: corpus.folder))
        let nginx = try #require(Nginx(root: corpus.www, folder: corpus.folder, tls: certificates))
        corpus.publish(["levels-1.1.zip"], baseURL: nginx.tlsBase, serial: 1)
        corpus.publish(["levels-1.1.zip"], baseURL: nginx.tlsBase + "/tohttp", prefix: "tohttp", serial: 1)
        corpus.publish(["levels-1.1.zip"], baseURL: nginx.tlsBase + "/tofile", prefix: "tofile", serial: 1)
        let common = ["--trusted-key", corpus.pub, "--product", "com.example.levels", "--retries", "0"]

        let untrusted = corpus.destination("untrusted")
        let refused = fetch([nginx.tlsBase + "/catalog.json", "--dest", untrusted] + common)
        #expect(refused.status == 1 && refused.stderr.lowercased().contains("certificate"), "\(refused.stderr)")
        #expect(corpus.snapshot(untrusted).keys.allSatisfy { $0.hasPrefix(".hcpack") })

        let dest = corpus.destination("app")
        let ok = fetch([nginx.tlsBase + "/catalog.json", "--dest", dest, "--cacert", certificates.ca] + common)
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(corpus.snapshot(dest) == direct(corpus, ["levels-1.1.zip"], name: "direct"))

        for scenario in ["tohttp", "tofile"] {
            let target = corpus.destination(scenario + "-dest")
            let result = fetch([nginx.tlsBase + "/\(scenario)/catalog.json", "--dest", target, "--cacert", certificates.ca] + common)
            #expect(result.status == 1, "\(scenario): \(result.stderr)")
            #expect(result.stderr.contains("levels-1.1.zip"), "\(scenario): \(result.stderr)")
            #expect(corpus.snapshot(target).keys.allSatisfy { $0.hasPrefix(".hcpack") })
            #expect(corpus.partials(target).values.allSatisfy { $0 == 0 })
        }
        // Neither redirect was followed: the plain server never saw the archive.
        #expect(nginx.requests().filter { $0.uri == "/levels-1.1.zip" }.count == 1)
    }

    @Test("a catalog whose note does not match, an expired one, and a lower serial are refused with DIR as it was")
    func trust() throws {
        let (corpus, nginx, url) = try release()
        let dest = corpus.installed(["levels-1.0.zip"], into: "app")
        let common = ["--trusted-key", corpus.pub, "--dest", dest]

        corpus.publish(["levels-1.1.zip"], baseURL: nginx.base, serial: 5)
        var catalog = try #require(corpus.folder.read("www/catalog.json"))
        catalog.insert(0x20, at: 1)
        corpus.folder.write("www/catalog.json", catalog)
        let before = corpus.snapshot(dest)
        let tampered = fetch([url] + common)
        #expect(tampered.status == 1 && tampered.stderr.contains("is not the catalog signed in"), "\(tampered.stderr)")
        #expect(corpus.snapshot(dest) == before)

        corpus.publish(["levels-1.1.zip"], baseURL: nginx.base, serial: 6, expires: "2020-01-01T00:00:00Z")
        let expired = fetch([url] + common)
        #expect(expired.status == 1 && expired.stderr.contains("expired at 2020-01-01T00:00:00Z"), "\(expired.stderr)")
        #expect(corpus.snapshot(dest) == before)

        corpus.publish(["levels-1.0.zip"], baseURL: nginx.base, serial: 7)
        #expect(fetch([url] + common).status == 0)
        corpus.publish(["levels-1.1.zip"], baseURL: nginx.base, serial: 6)
        let replayed = fetch([url] + common)
        #expect(replayed.status == 1 && replayed.stderr.contains("serial 6, lower than 7"), "\(replayed.stderr)")
        #expect(corpus.snapshot(dest) == before)
        // Refused before any archive was asked for.
        #expect(!nginx.requests().contains { $0.uri.hasSuffix(".zip") })

        // The serial is kept for DIR, not per URL: the same catalog read from disk is refused as well.
        let local = fetch([corpus.folder.url("www/catalog.json")] + common)
        #expect(local.status == 1 && local.stderr.contains("lower than 7"), "\(local.stderr)")
    }
}
