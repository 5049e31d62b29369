import Foundation
import HTTPTransport
import Synchronization

/// Stops a fetch from another thread (or a cancelled task): transfers end at their next callback, partial
/// files stay, so the next run resumes.
public final class FetchCancellation: Sendable {
    private let flag = Mutex(false)

    public init() {}

    /// Asks every transfer and wait to stop.
    public func cancel() { flag.withLock { $0 = true } }

    /// Whether `cancel` was called.
    public var isCancelled: Bool { flag.withLock { $0 } }

    /// Sleeps `seconds` in short slices; false when cancelled meanwhile.
    func sleep(_ seconds: Double) -> Bool {
        var left = seconds
        while left > 0 {
            if isCancelled { return false }
            let slice = min(left, 0.05)
            Thread.sleep(forTimeInterval: slice)
            left -= slice
        }
        return !isCancelled
    }
}

/// One file to download: where (the catalog's URL, then the same path under each mirror), how big, which SHA-256.
struct DownloadTarget {
    var urls: [String]
    var size: Int64
    var sha256: String
}

/// What a finished download cost.
struct DownloadStats {
    /// Bytes received over the network in this run.
    var downloaded: Int64 = 0
    /// Bytes already on disk from an earlier run that were kept.
    var resumed: Int64 = 0
}

/// A download that stopped for good.
struct DownloadStop: Error {
    var failure: DownloadFailure
    var stats: DownloadStats
}

/// Drives `DownloadMachine` with an `HTTPClient`: writes each accepted body at its offset in the partial file,
/// hashing as the bytes arrive (`DownloadSink`, on another thread; when resuming, over the bytes already on
/// disk first), so a finished file is never read again for its hash. The file is written back to disk as it
/// grows, not synced: the install that reads it next then finds little of it left for its `syncfs`.
final class Downloader {
    let client: HTTPClient
    let policy: RetryPolicy
    let cancellation: FetchCancellation
    /// The rate floor, bytes a second: an archive's deadline gives its bytes this rate.
    let minRate: Int
    /// Where every download of this downloader goes, one at a time.
    private let sink = DownloadSink()

    init(limits: HTTPLimits, policy: RetryPolicy, cancellation: FetchCancellation) throws(HCPackError) {
        do {
            client = try HTTPClient(limits: limits)
        } catch {
            throw HCPackError(.io, error.message)
        }
        minRate = limits.lowSpeedBytes
        self.policy = policy
        self.cancellation = cancellation
    }

    deinit { sink.close() }

    /// Downloads `target` into the store's `<sha256>.download` until its size and SHA-256 are the expected ones.
    /// - Parameter progress: (bytes on disk, total) as bytes arrive.
    /// - Throws: `DownloadStop` (refused or unavailable); `HCPackError` for the local file system.
    func download(_ target: DownloadTarget, store: FetchStore, progress: @escaping (Int64, Int64) -> Void) throws -> DownloadStats {
        let (file, storedValidator) = try store.partial(target.sha256)
        defer { file.close() }
        let writeBehind = file.startWriteBehind()
        defer { try? writeBehind.finish() }
        let sink = self.sink
        sink.attach(file)
        defer { sink.attach(nil) }
        var stats = DownloadStats()
        var onDisk = try file.size()
        if onDisk > target.size {
            try file.truncate(to: 0)
            onDisk = 0
        }
        // Resuming: the bytes already there go through the hash first.
        if onDisk > 0 {
            try sink.rehash(length: onDisk)
            stats.resumed = onDisk
        }
        var validator = onDisk > 0 ? storedValidator : nil
        var lastFailure: DownloadFailure?
        for (index, url) in target.urls.enumerated() {
            // Another host's validator means nothing here; the final hash still guards the bytes.
            var machine = DownloadMachine(
                url: url, size: target.size, onDisk: sink.position, validator: index == 0 ? validator : nil, policy: policy)
            while true {
                if cancellation.isCancelled { throw cancelled(stats) }
                switch machine.step(jitter: Double.random(in: 0..<1)) {
                case .send(let request):
                    guard cancellation.sleep(request.delay) else { throw cancelled(stats) }
                    var writeError: HCPackError?
                    var headers: [HTTPHeaderField] = []
                    if let start = request.rangeStart {
                        headers.append(HTTPHeaderField("Range", "bytes=\(start)-"))
                        if let ifRange = request.ifRange { headers.append(HTTPHeaderField("If-Range", ifRange)) }
                    }
                    var failure: TransportFailure?
                    do {
                        _ = try client.get(
                            HTTPRequest(
                                url: request.url, headers: headers,
                                deadline: policy.deadline(bytes: target.size - (request.rangeStart ?? 0), minRate: minRate)),
                            onHead: { head in
                                switch machine.received(Self.replyHead(head), jitter: Double.random(in: 0..<1)) {
                                case .discard: return false
                                case .write(let offset):
                                    do {
                                        // Another offset than the sink's: starting over, whatever was hashed goes.
                                        try file.truncate(to: offset)
                                        sink.begin(at: offset)
                                        if offset == 0 { stats.resumed = 0 }
                                        return true
                                    } catch {
                                        writeError = error as? HCPackError
                                        return false
                                    }
                                }
                            },
                            onBody: { bytes in
                                let allowed = machine.accept(bytes.count)
                                do throws(HCPackError) {
                                    try sink.append(UnsafeRawBufferPointer(rebasing: bytes[..<allowed]))
                                } catch {
                                    writeError = error
                                    return false
                                }
                                stats.downloaded += Int64(allowed)
                                progress(sink.position, target.size)
                                return allowed == bytes.count && !self.cancellation.isCancelled
                            },
                            onTick: { !self.cancellation.isCancelled })
                    } catch {
                        switch error.kind {
                        case .connection, .stalled, .deadline: failure = .transient("\(error.url): \(error.message)")
                        default: failure = .permanent("\(error.url): \(error.message)")
                        }
                    }
                    // The last bytes taken go to the file before anything looks at it.
                    if writeError == nil {
                        do throws(HCPackError) { try sink.flush() } catch { writeError = error }
                    }
                    if let writeError { throw writeError }
                    if cancellation.isCancelled {
                        try store.recordValidator(machine.validator, url: url, for: target.sha256)
                        throw cancelled(stats)
                    }
                    machine.ended(failure: failure, jitter: Double.random(in: 0..<1))
                    if machine.onDisk != sink.position {
                        // The machine restarted from zero: so does the file.
                        try file.truncate(to: machine.onDisk)
                        sink.begin(at: machine.onDisk)
                        stats.resumed = 0
                    }
                    validator = machine.validator
                    try store.recordValidator(validator, url: url, for: target.sha256)
                case .verify:
                    if !sink.isCovering || sink.position != target.size {
                        try sink.rehash(length: target.size)
                    }
                    let matches = sink.finalize() == target.sha256
                    if !matches {
                        try file.truncate(to: 0)
                        try store.recordValidator(nil, url: url, for: target.sha256)
                        stats.resumed = 0
                    }
                    machine.verified(matches: matches)
                case .done:
                    // No fsync: the download is only the installer's input (the installer syncs what it places),
                    // and bytes a crash loses are found by the hash on resume and fetched again.
                    return stats
                case .failed(let failure):
                    lastFailure = failure
                }
                if lastFailure != nil { break }
            }
            // A refusal is the bytes' fault, not the host's: a mirror is tried only when the host failed.
            if let failure = lastFailure, failure.kind == .refused { throw DownloadStop(failure: failure, stats: stats) }
            if index + 1 < target.urls.count {
                lastFailure = nil
                onDisk = try file.size()
                if onDisk != sink.position {
                    try file.truncate(to: sink.position)
                }
            }
        }
        throw DownloadStop(
            failure: lastFailure ?? DownloadFailure(kind: .unavailable, message: "no URL to download from"), stats: stats)
    }

    private func cancelled(_ stats: DownloadStats) -> DownloadStop {
        DownloadStop(failure: DownloadFailure(kind: .unavailable, message: "cancelled; a rerun resumes from the bytes on disk"), stats: stats)
    }

    /// A small file (catalog, note) into memory, at most `limit` bytes, with the same retries.
    func fetchSmall(_ urls: [String], limit: Int) throws(DownloadStop) -> [UInt8] {
        var last = DownloadFailure(kind: .unavailable, message: "no URL to download from")
        for url in urls {
            var failures = 0
            while true {
                if cancellation.isCancelled { throw cancelled(DownloadStats()) }
                var body: [UInt8] = []
                var tooLarge = false
                var outcome: HTTPOutcome?
                var transport: HTTPError?
                do {
                    outcome = try client.get(
                        HTTPRequest(url: url, deadline: policy.deadline(bytes: nil, minRate: minRate)), onHead: { $0.status == 200 && ($0["content-encoding"] ?? "identity") == "identity" },
                        onBody: { bytes in
                            guard body.count + bytes.count <= limit else {
                                tooLarge = true
                                return false
                            }
                            body += bytes
                            return !self.cancellation.isCancelled
                        }, onTick: { !self.cancellation.isCancelled })
                } catch {
                    transport = error
                }
                if tooLarge {
                    throw DownloadStop(failure: DownloadFailure(kind: .refused, message: "\(url) is larger than \(limit) bytes"), stats: DownloadStats())
                }
                var retry: String?
                var retryAfter: String?
                if let transport {
                    guard [.connection, .stalled, .deadline].contains(transport.kind) else {
                        throw DownloadStop(failure: DownloadFailure(kind: .refused, message: transport.description), stats: DownloadStats())
                    }
                    retry = transport.description + (transport.kind == .deadline ? " (a slow link may need a longer --timeout)" : "")
                } else if let outcome {
                    let status = outcome.head.status
                    if status == 200 {
                        if let coding = outcome.head["content-encoding"], coding.lowercased() != "identity" {
                            throw DownloadStop(
                                failure: DownloadFailure(kind: .refused, message: "\(url) was sent with Content-Encoding '\(coding)' though identity was asked"),
                                stats: DownloadStats())
                        }
                        if outcome.completed { return body }
                        retry = "\(url) ended early"
                    } else if status == 408 || status == 429 || (500...599).contains(status) {
                        retry = "\(url) answered \(status)"
                        retryAfter = outcome.head["retry-after"]
                    } else {
                        last = DownloadFailure(kind: .unavailable, message: "\(url) answered \(status); check the URL")
                        break
                    }
                }
                failures += 1
                last = DownloadFailure(kind: .unavailable, message: "\(retry ?? url); gave up after \(failures) attempts")
                guard failures <= policy.maxFailures else { break }
                guard cancellation.sleep(policy.delay(failures: failures, jitter: Double.random(in: 0..<1), retryAfter: retryAfter)) else {
                    throw cancelled(DownloadStats())
                }
            }
        }
        throw DownloadStop(failure: last, stats: DownloadStats())
    }

    static func replyHead(_ head: HTTPResponseHead) -> ReplyHead {
        ReplyHead(
            status: head.status, contentRange: head["content-range"], contentEncoding: head["content-encoding"],
            contentLength: head["content-length"].flatMap { Int64($0) }, etag: head["etag"], lastModified: head["last-modified"],
            retryAfter: head["retry-after"])
    }
}
