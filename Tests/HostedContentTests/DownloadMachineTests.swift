import Testing

@testable import HostedContent

/// The download decisions without sockets: replies as values in, requests and partial-file plans out.
@Suite struct DownloadMachineTests {
    let url = "https://cdn.example/a.zip"

    func machine(onDisk: Int64 = 0, validator: String? = nil, maxFailures: Int = 5) -> DownloadMachine {
        var policy = RetryPolicy()
        policy.maxFailures = maxFailures
        return DownloadMachine(url: url, size: 100, onDisk: onDisk, validator: validator, policy: policy)
    }

    func request(_ step: DownloadMachine.Step) -> DownloadMachine.Request? {
        if case .send(let request) = step { return request }
        return nil
    }

    func failure(_ step: DownloadMachine.Step) -> DownloadFailure? {
        if case .failed(let failure) = step { return failure }
        return nil
    }

    @Test("a fresh download asks for the whole file, writes from zero, and verifies at the catalog's size")
    func fresh() throws {
        var m = machine()
        let first = try #require(request(m.step()))
        #expect(first.rangeStart == nil && first.ifRange == nil && first.delay == 0)
        #expect(m.received(ReplyHead(status: 200, contentLength: 100, etag: "\"v1\"")) == .write(at: 0))
        #expect(m.accept(60) == 60)
        #expect(m.accept(40) == 40)
        m.ended(failure: nil)
        #expect(m.step() == .verify)
        m.verified(matches: true)
        #expect(m.step() == .done)
        #expect(m.validator == "\"v1\"")
    }

    @Test("bytes on disk are resumed with Range and If-Range, and a matching 206 continues where asked")
    func resume() throws {
        var m = machine(onDisk: 40, validator: "\"v1\"")
        let next = try #require(request(m.step()))
        #expect(next.rangeStart == 40 && next.ifRange == "\"v1\"")
        #expect(m.received(ReplyHead(status: 206, contentRange: "bytes 40-99/100")) == .write(at: 40))
        #expect(m.accept(60) == 60)
        m.ended(failure: nil)
        #expect(m.step() == .verify)
    }

    @Test("a 200 to a range request restarts from zero with the new validator")
    func ignoredRange() {
        var m = machine(onDisk: 40, validator: "\"v1\"")
        _ = m.step()
        #expect(m.received(ReplyHead(status: 200, contentLength: 100, etag: "\"v2\"")) == .write(at: 0))
        #expect(m.onDisk == 0 && m.validator == "\"v2\"")
    }

    @Test("a 206 that starts elsewhere or names another total restarts from zero", arguments: [
        "bytes 0-99/100", "bytes 41-99/100", "bytes 40-99/200", "bytes 40-99/*", "garbage",
    ])
    func wrongContentRange(_ range: String) throws {
        var m = machine(onDisk: 40, validator: "\"v1\"")
        _ = m.step()
        #expect(m.received(ReplyHead(status: 206, contentRange: range)) == .discard)
        m.ended(failure: nil)
        let next = try #require(request(m.step()))
        #expect(next.rangeStart == nil && next.ifRange == nil && next.delay > 0)
        #expect(m.onDisk == 0 && m.failures == 1)
    }

    @Test("never written past the catalog's size: the excess is cut and the reply refused")
    func tooLong() throws {
        var m = machine()
        _ = m.step()
        #expect(m.received(ReplyHead(status: 200)) == .write(at: 0))
        #expect(m.accept(90) == 90)
        #expect(m.accept(30) == 10)
        m.ended(failure: nil)
        let failed = try #require(failure(m.step()))
        #expect(failed.kind == .refused && failed.message.contains("more than the catalog's 100 bytes"))
    }

    @Test("a 200 announcing another length than the catalog's is refused before any byte is written")
    func wrongLength() throws {
        var m = machine()
        _ = m.step()
        #expect(m.received(ReplyHead(status: 200, contentLength: 101)) == .discard)
        #expect(try #require(failure(m.step())).kind == .refused)
    }

    @Test("a content-encoded reply is refused", arguments: ["gzip", "br", " GZIP "])
    func encoded(_ coding: String) throws {
        var m = machine()
        _ = m.step()
        #expect(m.received(ReplyHead(status: 200, contentEncoding: coding, contentLength: 100)) == .discard)
        let failed = try #require(failure(m.step()))
        #expect(failed.kind == .refused && failed.message.contains("Content-Encoding"))
    }

    @Test("5xx, 408 and 429 are retried with a growing, capped backoff, then given up as unavailable", arguments: [500, 503, 408, 429])
    func retried(_ status: Int) throws {
        var m = machine(maxFailures: 3)
        _ = m.step()
        var delays: [Double] = []
        for _ in 0..<3 {
            #expect(m.received(ReplyHead(status: status)) == .discard)
            m.ended(failure: nil)
            delays.append(try #require(request(m.step(jitter: 0.99))).delay)
        }
        #expect(delays[0] < delays[1] && delays[1] < delays[2])
        #expect(m.received(ReplyHead(status: status)) == .discard)
        m.ended(failure: nil)
        let failed = try #require(failure(m.step()))
        #expect(failed.kind == .unavailable && failed.message.contains("gave up after 4 attempts"))
    }

    @Test("the backoff never exceeds its cap, jitter or not")
    func capped() {
        var policy = RetryPolicy()
        policy.maxDelay = 4
        for failures in 1...40 {
            #expect(policy.backoff(failures: failures, jitter: 1) <= 4)
            #expect(policy.backoff(failures: failures, jitter: 0) >= policy.backoff(failures: 1, jitter: 0) / 1.0001)
        }
    }

    @Test("Retry-After is honoured up to the cap")
    func retryAfter() throws {
        var m = machine()
        m.policy.maxRetryAfter = 10
        _ = m.step()
        _ = m.received(ReplyHead(status: 429, retryAfter: "3"))
        m.ended(failure: nil)
        #expect(try #require(request(m.step())).delay >= 3)
        _ = m.received(ReplyHead(status: 429, retryAfter: "99999"))
        m.ended(failure: nil)
        #expect(try #require(request(m.step())).delay == 10)
        #expect(DownloadMachine.retryAfterSeconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0)
    }

    @Test("other 4xx fail at once, naming the URL and the status", arguments: [400, 401, 403, 404, 410])
    func clientErrors(_ status: Int) throws {
        var m = machine()
        _ = m.step()
        #expect(m.received(ReplyHead(status: status)) == .discard)
        m.ended(failure: nil)
        let failed = try #require(failure(m.step()))
        #expect(failed.kind == .unavailable && failed.message.contains(url) && failed.message.contains("\(status)"))
        #expect(m.failures == 0)
    }

    @Test("a dropped connection is retried from the bytes received; a refused redirect or bad certificate is not")
    func transport() throws {
        var m = machine()
        _ = m.step()
        _ = m.received(ReplyHead(status: 200, etag: "\"v1\""))
        _ = m.accept(30)
        m.ended(failure: .transient("connection reset"))
        let next = try #require(request(m.step()))
        #expect(next.rangeStart == 30 && next.ifRange == "\"v1\"")
        m.ended(failure: .permanent("redirect to file:// refused"))
        #expect(try #require(failure(m.step())).kind == .refused)
    }

    @Test("a reply that ends short without an error is retried from where it stopped")
    func short() throws {
        var m = machine()
        _ = m.step()
        _ = m.received(ReplyHead(status: 200, lastModified: "Wed, 21 Oct 2015 07:28:00 GMT"))
        _ = m.accept(50)
        m.ended(failure: nil)
        let next = try #require(request(m.step()))
        #expect(next.rangeStart == 50 && next.ifRange == "Wed, 21 Oct 2015 07:28:00 GMT")
    }

    @Test("a weak ETag is never used for If-Range, nor a validator that is not printable ASCII")
    func weak() {
        #expect(DownloadMachine.validator(ReplyHead(status: 200, etag: "W/\"x\"", lastModified: "L")) == "L")
        #expect(DownloadMachine.validator(ReplyHead(status: 200, etag: "W/\"x\"")) == nil)
        // Sent back as a header: a CR, LF or other control byte would let the server add one (review finding 5).
        #expect(DownloadMachine.validator(ReplyHead(status: 200, etag: "\"v1\"\rX-Injected: 1")) == nil)
        #expect(DownloadMachine.validator(ReplyHead(status: 200, etag: "\"v1\"\r", lastModified: "L")) == nil)
        #expect(DownloadMachine.validator(ReplyHead(status: 200, lastModified: "Wed, 02 Dec 2026 10:00:00 GMT\n")) == nil)
        #expect(DownloadMachine.validator(ReplyHead(status: 200, etag: "\"v1\"")) == "\"v1\"")
        // A planted validator file with a CR is never sent (the bytes are resumed as without a validator, and
        // the whole file's SHA-256 decides as always).
        var planted = DownloadMachine(url: "u", size: 100, onDisk: 50, validator: "\"v1\"\rX: 1")
        #expect(planted.validator == nil)
        if case .send(let request) = planted.step() { #expect(request.ifRange == nil) } else { Issue.record("no request") }
    }

    @Test("a finished file with the wrong SHA-256 is fetched once more from zero, then refused")
    func hashMismatch() throws {
        var m = machine(onDisk: 100, validator: "\"v1\"")
        #expect(m.step() == .verify)
        m.verified(matches: false)
        let again = try #require(request(m.step()))
        #expect(again.rangeStart == nil && m.onDisk == 0)
        _ = m.received(ReplyHead(status: 200))
        _ = m.accept(100)
        m.ended(failure: nil)
        #expect(m.step() == .verify)
        m.verified(matches: false)
        let failed = try #require(failure(m.step()))
        #expect(failed.kind == .refused && failed.message.contains("SHA-256"))
    }

    @Test("a partial file longer than the catalog's size is not resumed")
    func oversizedPartial() throws {
        var m = DownloadMachine(url: url, size: 100, onDisk: 150, validator: "\"v1\"")
        let next = try #require(request(m.step()))
        #expect(next.rangeStart == nil && next.ifRange == nil)
    }

    @Test("An attempt's deadline: attemptSeconds for the note and catalog, plus the bytes still needed at the rate floor for an archive")
    func deadline() {
        var policy = RetryPolicy()
        #expect(policy.deadline(bytes: nil, minRate: 1024) == 60)
        #expect(policy.deadline(bytes: 10 * 1024, minRate: 1024) == 70)
        policy.attemptSeconds = 1
        #expect(policy.deadline(bytes: 0, minRate: 0) == 1)
        #expect(policy.deadline(bytes: -5, minRate: 100) == 1)
    }

    @Test("Content-Range parsing is strict")
    func contentRange() {
        #expect(ContentRange("bytes 10-19/20") == ContentRange("bytes 10-19/20"))
        #expect(ContentRange("bytes 10-19/20")?.start == 10)
        #expect(ContentRange("bytes 0-0/1")?.total == 1)
        // 1*DIGIT allows leading zeros.
        #expect(ContentRange("bytes 010-19/020") == ContentRange("bytes 10-19/20"))
        for bad in [
            "bytes 10-20/20", "bytes 19-10/20", "bytes -1-3/20", "items 0-1/2", "bytes 0-1/", "bytes 0-1/*",
            "bytes +10-19/20", "bytes 10-+19/20", "bytes 10-19/+20", "bytes 10 -19/20", "bytes 10-19 /20",
        ] {
            #expect(ContentRange(bad) == nil, "\(bad)")
        }
    }
}
