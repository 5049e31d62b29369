import Foundation
import HostedContent
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
        let (corpus, server) = try FaultServer.withStandardCorpus()
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/" + item.scenario, prefix: item.scenario, serial: 1)
        let dest = corpus.installed(["levels-1.0.zip"], into: "app")
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
        let (corpus, server) = try FaultServer.withStandardCorpus()
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

    @Test("--mirror: when the catalog's host fails, the same relative path is fetched from the mirror")
    func mirror() throws {
        let (corpus, server) = try FaultServer.withStandardCorpus()
        let nginx = try #require(Nginx(root: corpus.www, folder: corpus.folder))
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/missing", prefix: "missing", serial: 1)
        let dest = corpus.destination("app")
        let result = hcpack([
            "fetch", server.base + "/missing/catalog.json", "--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels",
            "--mirror", nginx.base + "/",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests("missing").filter { $0.path == "levels-1.1.zip" }.map(\.status) == [404])
        #expect(nginx.requests().map(\.uri) == ["/levels-1.1.zip"])
        #expect(corpus.folder.read("app/levels/3.json") == Array("{\"level\": 3}\n".utf8))
    }

    @Test("the library: events as an async sequence; cancelling the consuming task keeps the partial, the next run resumes it")
    func library() async throws {
        // A server that sends 100 bytes, then nothing: the fetch is mid-download until it is cancelled.
        let (corpus, server) = try FaultServer.withStandardCorpus()
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/stall", prefix: "stall", serial: 1)
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "good", serial: 1)
        let dest = corpus.destination("app")
        let keys = try VerifierKey.load(corpus.pub, relativeTo: ".")
        var options = FetchOptions(catalog: server.base + "/stall/catalog.json", trustedKeys: keys, destination: dest)
        options.products = ["com.example.levels"]
        let size = corpus.size("levels-1.1.zip")

        let (started, signal) = AsyncStream<Int64>.makeStream()
        let stalled = options
        let consumer = Task {
            for try await update in Fetcher.events(stalled) {
                if case .event(.downloading(_, _, let bytes, _)) = update, bytes > 0 { signal.yield(bytes) }
            }
        }
        var partial: Int64 = 0
        for await bytes in started {
            partial = bytes
            break
        }
        consumer.cancel()
        _ = await consumer.result
        #expect(partial == 100)
        // The worker thread stops at its next libcurl callback (at least once a second), then lets go of DIR.
        var released = false
        for _ in 0..<200 where !released {
            released = FetchKept.released(dest)
            if !released { try await Task.sleep(nanoseconds: 50_000_000) }
        }
        #expect(released)
        #expect(corpus.partials(dest).values.map { $0 } == [100])
        #expect(corpus.snapshot(dest).keys.allSatisfy { $0.hasPrefix(".hcpack") })

        options.catalog = server.base + "/good/catalog.json"
        var events: [FetchEvent] = []
        var report: FetchReport?
        for try await update in Fetcher.events(options) {
            switch update {
            case .event(let event): events.append(event)
            case .finished(let value): report = value
            }
        }
        let done = try #require(report?.products.first)
        #expect(done.status == .installed && done.resumedBytes == 100 && done.downloadedBytes == size - 100)
        #expect(events.first == .catalogAccepted(serial: 1, signers: report?.signers ?? []))
        #expect(events.last == .installed(product: "com.example.levels", version: "1.1", method: .full))
        #expect(events.contains(.verifying(product: "com.example.levels", file: "levels-1.1.zip")))
        #expect(server.requests("good").filter { $0.path == "levels-1.1.zip" }.map(\.range) == ["bytes=100-"])
    }
}
