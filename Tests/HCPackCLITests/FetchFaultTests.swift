import Foundation
import TestSupport
import Testing

/// `hcpack fetch` against the tests' own misbehaving server: every fault ends with the documented exit code, a
/// clear message, DIR as it was (or the right version installed), and no partial file past its size.
@Suite struct FetchFaultTests {
    /// What one fault must end in.
    struct Case: CustomTestStringConvertible, Sendable {
        var scenario: String
        var status: Int32
        /// Text the error (stderr) must hold; nil for a success.
        var message: String?
        /// Requests the server must have seen for the archive: (status, Range asked) in order.
        var replies: [Int]
        var testDescription: String { scenario }
    }

    static let cases: [Case] = [
        Case(scenario: "drop", status: 0, message: nil, replies: [200, 206]),
        Case(scenario: "norange", status: 0, message: nil, replies: [200, 200]),
        Case(scenario: "badrange", status: 0, message: nil, replies: [200, 206, 200]),
        Case(scenario: "etag", status: 0, message: nil, replies: [200, 200]),
        Case(scenario: "error500", status: 0, message: nil, replies: [500, 500, 200]),
        Case(scenario: "busy", status: 0, message: nil, replies: [429, 200]),
        Case(scenario: "missing", status: 3, message: "answered 404 (not found)", replies: [404]),
        Case(scenario: "long", status: 1, message: "sent more than the catalog's", replies: [200]),
        Case(scenario: "gzip", status: 1, message: "Content-Encoding 'gzip'", replies: [200]),
        Case(scenario: "loop", status: 1, message: "redirect", replies: [302, 302, 302, 302, 302, 302]),
        Case(scenario: "tofile", status: 1, message: "levels-1.1.zip", replies: [302]),
        Case(scenario: "stall", status: 3, message: "a rerun resumes", replies: [200, 200, 200]),
        Case(scenario: "swap", status: 1, message: "does not have the catalog's SHA-256, downloaded twice from zero", replies: [200, 200]),
    ]

    @Test("each fault ends as documented", arguments: cases)
    func fault(_ item: Case) throws {
        let corpus = FetchCorpus()
        corpus.standard()
        let server = try #require(FaultServer(root: corpus.www, folder: corpus.folder))
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/" + item.scenario, prefix: item.scenario, serial: 1)
        let dest = corpus.destination("app")
        #expect(hcpack(["install", corpus.folder.url("www/levels-1.0.zip"), "--dest", dest, "-q"]).status == 0)
        let before = corpus.snapshot(dest)
        let size = corpus.size("levels-1.1.zip")

        let result = hcpack([
            "fetch", server.base + "/\(item.scenario)/catalog.json", "--trusted-key", corpus.pub, "--dest", dest, "--retries", "2",
            "--retry-delay", "0.01", "--stall-seconds", "1", "--min-rate", "1000", "--progress", "json", "--json",
        ])
        #expect(result.status == item.status, "\(result.stderr)")
        let archive = server.requests(item.scenario).filter { $0.path == "levels-1.1.zip" }
        #expect(archive.map(\.status) == item.replies, "\(archive)")
        #expect(corpus.partials(dest).values.allSatisfy { $0 <= size })
        let report = try #require((jsonObject(result.stdout)?["products"] as? [[String: Any]])?.first, "\(result.stdout)")
        if let message = item.message {
            #expect(result.stderr.contains(message), "\(result.stderr)")
            #expect(corpus.snapshot(dest) == before)
            #expect(report["status"] as? String == "failed")
            let failed = result.stderr.split(separator: "\n").compactMap { jsonObject(String($0)) }.first { $0["event"] as? String == "failed" }
            #expect(failed?["resumable"] as? Bool == (item.status == 3))
            // Refused bytes never reach the installer (nor its archive reader).
            #expect(!result.stderr.contains("\"event\":\"installing\""))
        } else {
            #expect(report["status"] as? String == "installed")
            let direct = corpus.destination("direct")
            #expect(hcpack(["install", corpus.folder.url("www/levels-1.1.zip"), "--dest", direct, "-q"]).status == 0)
            #expect(corpus.snapshot(dest) == corpus.snapshot(direct))
            #expect(corpus.partials(dest).isEmpty)
        }
        // Resumed, not restarted, where the server allows it: the second request asks for the bytes after those kept.
        if item.scenario == "drop" {
            #expect(archive.map(\.range) == ["", "bytes=\(size / 2)-"])
            #expect(archive.map(\.bytes).reduce(0, +) == size)
            #expect((report["resumedBytes"] as? NSNumber)?.int64Value == 0 && (report["downloadedBytes"] as? NSNumber)?.int64Value == size)
        }
        if item.scenario == "etag" || item.scenario == "norange" {
            #expect(archive.map(\.range) == ["", "bytes=\(size / 2)-"])
        }
        if item.scenario == "badrange" {
            // The wrong Content-Range is not spliced in: the third request starts from zero.
            #expect(archive.map(\.range) == ["", "bytes=\(size / 2)-", ""])
        }
    }

    @Test("a stalled transfer leaves a partial file that the next run resumes with Range")
    func stallThenResume() throws {
        let corpus = FetchCorpus()
        corpus.standard()
        let server = try #require(FaultServer(root: corpus.www, folder: corpus.folder))
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/stall", prefix: "stall", serial: 1)
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "good", serial: 1)
        let dest = corpus.destination("app")
        let common = ["--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels", "--retries", "0", "--stall-seconds", "1", "--min-rate", "1000"]
        let stalled = hcpack(["fetch", server.base + "/stall/catalog.json"] + common)
        #expect(stalled.status == 3, "\(stalled.stderr)")
        #expect(corpus.partials(dest).values.map { $0 } == [100])
        // Same archive, same SHA-256, now from a server that behaves: only the rest is asked for.
        let resumed = hcpack(["fetch", server.base + "/good/catalog.json", "--json"] + common)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let report = try #require((jsonObject(resumed.stdout)?["products"] as? [[String: Any]])?.first)
        #expect((report["resumedBytes"] as? NSNumber)?.int64Value == 100)
        #expect(server.requests("good").filter { $0.path == "levels-1.1.zip" }.map(\.range) == ["bytes=100-"])
    }
}
