import Foundation

/// How often and how long a download retries (docs/fetch.md).
public struct RetryPolicy: Sendable, Equatable {
    /// Failed attempts (transport errors, 5xx, 408, 429, restarts) tolerated before giving up.
    public var maxFailures: Int = 5
    /// The first backoff, in seconds; doubled for each failure, up to `maxDelay`.
    public var baseDelay: Double = 0.5
    /// The longest backoff, in seconds.
    public var maxDelay: Double = 30
    /// The longest `Retry-After` honoured, in seconds; a longer one is waited for this long.
    public var maxRetryAfter: Double = 60
    /// Seconds one attempt at a file of unknown size (the note, the catalog) may take in all; an attempt at a
    /// file of known size (an archive, a delta) gets this plus the bytes it still needs at the rate floor. A
    /// server that sends just above the floor forever is cut here.
    public var attemptSeconds: Double = 60

    public init() {}

    /// The deadline of one attempt that still needs `bytes` (nil: unknown) at `minRate` bytes a second.
    func deadline(bytes: Int64?, minRate: Int) -> Double {
        guard let bytes else { return attemptSeconds }
        return attemptSeconds + Double(max(0, bytes)) / Double(max(1, minRate))
    }

    /// The wait before attempt `failures + 1`: capped exponential, with up to half of it random (`jitter` in 0..<1).
    func backoff(failures: Int, jitter: Double) -> Double {
        let exponent = Double(max(0, min(failures - 1, 30)))
        let full = min(maxDelay, baseDelay * pow(2, exponent))
        return full * (0.5 + 0.5 * min(max(jitter, 0), 1))
    }

    /// The wait before attempt `failures + 1`: the backoff, or longer when the server asked (`Retry-After`,
    /// in seconds or as an HTTP date), up to `maxRetryAfter`.
    func delay(failures: Int, jitter: Double, retryAfter: String?) -> Double {
        let backoff = backoff(failures: failures, jitter: jitter)
        guard let asked = retryAfter.flatMap({ DownloadMachine.retryAfterSeconds($0) }) else { return backoff }
        return max(backoff, min(asked, maxRetryAfter))
    }
}

/// The parts of a reply that decide what its body means for the partial file.
public struct ReplyHead: Sendable, Equatable {
    public var status: Int
    public var contentRange: String?
    public var contentEncoding: String?
    public var contentLength: Int64?
    public var etag: String?
    public var lastModified: String?
    public var retryAfter: String?

    public init(
        status: Int, contentRange: String? = nil, contentEncoding: String? = nil, contentLength: Int64? = nil,
        etag: String? = nil, lastModified: String? = nil, retryAfter: String? = nil
    ) {
        self.status = status
        self.contentRange = contentRange
        self.contentEncoding = contentEncoding
        self.contentLength = contentLength
        self.etag = etag
        self.lastModified = lastModified
        self.retryAfter = retryAfter
    }
}

/// Why a download stopped for good.
public struct DownloadFailure: Sendable, Equatable, CustomStringConvertible {
    /// `refused`: the server's bytes or replies are wrong (exit 1); `unavailable`: network, server errors, a
    /// missing file (exit 3: a rerun resumes).
    public enum Kind: String, Sendable { case refused, unavailable }
    public var kind: Kind
    public var message: String
    public var description: String { message }
}

/// A transport failure, as the machine sees it.
public enum TransportFailure: Sendable, Equatable {
    /// Connection, stall, reply cut short: retried.
    case transient(String)
    /// TLS verification, a refused redirect, a malformed reply: not retried.
    case permanent(String)
}

/// The decisions of one download with no I/O (docs/fetch.md, "States"): fed replies as values, it says what the
/// partial file must become and which request comes next. Tested without sockets; driven by `Downloader`.
public struct DownloadMachine: Sendable {
    /// What the next request must be.
    public struct Request: Sendable, Equatable {
        public var url: String
        /// Ask for bytes from here on (`Range: bytes=N-`); nil asks for the whole file.
        public var rangeStart: Int64?
        /// `If-Range` validator, sent with `rangeStart`.
        public var ifRange: String?
        /// Seconds to wait before sending it.
        public var delay: Double
    }

    /// What the driver does next.
    public enum Step: Sendable, Equatable {
        /// Send this request.
        case send(Request)
        /// The partial file has exactly the expected size: hash it (or use the running hash) and report.
        case verify
        /// The file is complete and its SHA-256 is the expected one.
        case done
        /// Give up: the partial file stays (a rerun resumes) unless the failure says otherwise.
        case failed(DownloadFailure)
    }

    /// What to do with a reply's body.
    public enum BodyPlan: Sendable, Equatable {
        /// Write the body at this offset, after truncating the partial file to it (0: start over).
        case write(at: Int64)
        /// Do not use this body; stop the transfer (the next `step()` says what follows).
        case discard
    }

    public let url: String
    /// The size the catalog gives: never written past.
    public let size: Int64
    public var policy: RetryPolicy
    /// Bytes of the partial file that are known to belong to the current attempt's file.
    public private(set) var onDisk: Int64
    /// The validator the bytes on disk came with (a strong ETag, else Last-Modified).
    public private(set) var validator: String?
    /// Failed attempts so far.
    public private(set) var failures = 0
    /// Whether a complete file with a wrong SHA-256 was already thrown away once.
    public private(set) var refetchedAfterHashMismatch = false
    /// Set when the last reply changed where writing restarts (the partial file must be truncated there).
    private var pending: Step?
    private var lastRetryAfter: String?

    /// A download of `size` bytes from `url`, continuing from `onDisk` bytes already there (with the validator
    /// they came with).
    public init(url: String, size: Int64, onDisk: Int64 = 0, validator: String? = nil, policy: RetryPolicy = RetryPolicy()) {
        self.url = url
        self.size = size
        self.policy = policy
        // A partial file longer than the catalog's size was not written by us: start over.
        self.onDisk = onDisk <= size ? max(0, onDisk) : 0
        // The validator file is DIR's, untrusted like the reply it came from.
        self.validator = self.onDisk > 0 ? validator.flatMap { Self.sendable($0) ? $0 : nil } : nil
    }

    /// The next thing to do; `jitter` in 0..<1 spreads retries.
    public mutating func step(jitter: Double = 0.5) -> Step {
        if let pending {
            self.pending = nil
            return pending
        }
        if onDisk == size { return .verify }
        let resume = onDisk > 0
        return .send(Request(url: url, rangeStart: resume ? onDisk : nil, ifRange: resume ? validator : nil, delay: 0))
    }

    /// A reply's head arrived: what to do with its body.
    public mutating func received(_ head: ReplyHead, jitter: Double = 0.5) -> BodyPlan {
        if let coding = head.contentEncoding?.trimmingCharacters(in: .whitespaces).lowercased(), !coding.isEmpty, coding != "identity" {
            fail(.refused, "\(url) was sent with Content-Encoding '\(coding)' though identity was asked: the server recompresses the archive; serve it as is (docs/fetch.md, CDN checklist)")
            return .discard
        }
        switch head.status {
        case 200:
            if let length = head.contentLength, length != size {
                fail(.refused, "\(url) has \(length) bytes on the server, the catalog says \(size): the server holds another file; publish the catalog's archive")
                return .discard
            }
            // The whole file: whatever was on disk is replaced.
            onDisk = 0
            validator = Self.validator(head)
            return .write(at: 0)
        case 206:
            let expectedStart = onDisk
            guard let range = ContentRange(head.contentRange ?? ""), range.start == expectedStart, range.total == size,
                range.end < size
            else {
                // Another range, or another file: the bytes on disk cannot be continued with this reply.
                restart(reason: "\(url) answered with Content-Range '\(head.contentRange ?? "")', not bytes \(expectedStart)-…/\(size)", jitter: jitter)
                return .discard
            }
            if onDisk == 0 { validator = Self.validator(head) }
            return .write(at: onDisk)
        case 416:
            restart(reason: "\(url) refused the range from byte \(onDisk) (416)", jitter: jitter)
            return .discard
        case 408, 429, 500...599:
            lastRetryAfter = head.retryAfter
            retry("\(url) answered \(head.status)", jitter: jitter)
            return .discard
        default:
            fail(.unavailable, "\(url) answered \(head.status)\(head.status == 404 ? " (not found)" : ""); check the catalog's URL and that the file was uploaded")
            return .discard
        }
    }

    /// `count` body bytes were accepted at the current offset.
    /// - Returns: how many of them may be written: fewer than `count` when the server sends more than the
    ///   catalog's size (the reply is then refused and the transfer must stop).
    public mutating func accept(_ count: Int) -> Int {
        let room = size - onDisk
        if Int64(count) > room {
            onDisk = size
            fail(.refused, "\(url) sent more than the catalog's \(size) bytes: the server holds another file; publish the catalog's archive")
            return Int(room)
        }
        onDisk += Int64(count)
        return count
    }

    /// The transfer ended (completed, stopped, or failed below HTTP).
    public mutating func ended(failure: TransportFailure?, jitter: Double = 0.5) {
        guard pending == nil else { return }
        switch failure {
        case .none:
            // A reply that ended before `size` bytes: the connection closed early.
            if onDisk < size { retry("\(url) ended after \(onDisk) of \(size) bytes", jitter: jitter) }
        case .transient(let message):
            retry(message, jitter: jitter)
        case .permanent(let message):
            fail(.refused, message)
        }
    }

    /// The complete file was hashed.
    public mutating func verified(matches: Bool) {
        if matches {
            pending = .done
            return
        }
        onDisk = 0
        validator = nil
        if refetchedAfterHashMismatch {
            fail(.refused, "\(url) does not have the catalog's SHA-256, downloaded twice from zero: the server holds another file; publish the catalog's archive")
        } else {
            // Once more from zero: a splice across two versions, or a damaged cache, may not happen again.
            refetchedAfterHashMismatch = true
        }
    }

    private mutating func restart(reason: String, jitter: Double) {
        onDisk = 0
        validator = nil
        retry(reason + "; starting again from zero", jitter: jitter)
    }

    private mutating func retry(_ reason: String, jitter: Double) {
        failures += 1
        guard failures <= policy.maxFailures else {
            fail(.unavailable, "\(reason); gave up after \(failures) attempts (a rerun resumes from the \(onDisk) bytes on disk)")
            return
        }
        let delay = policy.delay(failures: failures, jitter: jitter, retryAfter: lastRetryAfter)
        lastRetryAfter = nil
        let resume = onDisk > 0
        pending = .send(Request(url: url, rangeStart: resume ? onDisk : nil, ifRange: resume ? validator : nil, delay: delay))
    }

    private mutating func fail(_ kind: DownloadFailure.Kind, _ message: String) {
        pending = .failed(DownloadFailure(kind: kind, message: message))
    }

    /// A strong ETag, else Last-Modified: what `If-Range` may carry (a weak ETag may not). Only printable ASCII
    /// is kept, since it is sent back as a header: a CR or LF in it (libcurl passes a bare CR through) would
    /// add a header of the server's choosing to the next request.
    static func validator(_ head: ReplyHead) -> String? {
        if let etag = head.etag, !etag.hasPrefix("W/"), !etag.isEmpty { return sendable(etag) ? etag : nil }
        return head.lastModified.flatMap { sendable($0) ? $0 : nil }
    }

    /// Whether `value` may go back in a request header: 1 to 1024 bytes of printable ASCII.
    static func sendable(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 1024 && value.utf8.allSatisfy { (0x20...0x7e).contains($0) }
    }

    /// `Retry-After` as seconds: a number, or an HTTP date.
    static func retryAfterSeconds(_ text: String, now: Date = Date()) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let seconds = Double(trimmed), seconds >= 0, seconds.isFinite { return seconds }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}

/// `Content-Range: bytes START-END/TOTAL` (RFC 9110); `*` as total is not accepted.
struct ContentRange: Equatable {
    var start: Int64
    var end: Int64
    var total: Int64

    /// RFC 9110's 1*DIGIT: Int64("+5") would also take a sign.
    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int64(text)
    }

    init?(_ text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("bytes ") else { return nil }
        let rest = trimmed.dropFirst(6)
        let halves = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, let total = Self.number(halves[1]) else { return nil }
        let bounds = halves[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let start = Self.number(bounds[0]), let end = Self.number(bounds[1]), start <= end, end < total else {
            return nil
        }
        self.start = start
        self.end = end
        self.total = total
    }
}
