import Foundation
import HTTPTransport
import Synchronization

/// `hcpack fetch`: from a signed catalog to installed content (docs/fetch.md). Walks the seven steps of
/// docs/self-hosting.md for each wanted product: catalog and note, signature, serial and expiry, delta or full,
/// download (resumable), size and SHA-256 before any archive reader sees a byte, install.
public enum Fetcher {
    /// Largest catalog note fetched.
    static let maxNoteBytes = SignedNote.maxBytes

    /// Runs a fetch; `events` is called from worker threads, one call at a time.
    /// - Returns: the report (failures of single products are in it, not thrown).
    /// - Throws: `HCPackError` for what stops the whole run: a refused catalog (`.invalidPackage`), nothing selected
    ///   or an unknown product (`.invalidRequest`), the catalog unavailable or DIR unusable (`.io`, `.notFound`, ...).
    public static func fetch(
        _ options: FetchOptions, cancellation: FetchCancellation = FetchCancellation(), events: @escaping @Sendable (FetchEvent) -> Void = { _ in }
    ) throws(HCPackError) -> FetchReport {
        let emit = SerialEmitter(events)
        let downloader = try Downloader(limits: options.http, policy: options.retry, cancellation: cancellation)
        let accepted = try loadCatalog(options, downloader: downloader)
        // Selection reads DIR only: a usage error leaves it untouched.
        let selected = try select(options, catalog: accepted.catalog, installed: try FetchStore.receiptProducts(in: options.destination))
        let store = try FetchStore(destination: options.destination)
        try checkSerial(accepted, store: store)
        emit(.catalogAccepted(serial: accepted.catalog.serial, signers: accepted.signers))

        for package in selected { emit(.queued(product: package.productIdentifier, policy: package.policy)) }
        let run = ProductRun(options: options, accepted: accepted, store: store, cancellation: cancellation, emit: emit)
        var reports: [FetchProductReport] = []
        // Essential products first, one at a time: the app may use nothing before they are in place.
        let essential = selected.filter { $0.policy == .essential }
        let others = selected.filter { $0.policy != .essential }
        for package in essential { reports.append(run.product(package, downloader: downloader)) }
        reports += run.parallel(others, jobs: max(1, options.jobs), first: downloader)
        if !options.checkOnly {
            let named = accepted.catalog.packages.flatMap { [$0.sha256] + $0.deltas.map(\.sha256) }
            try store.pruneDownloads(keeping: Set(named))
        }
        return FetchReport(serial: accepted.catalog.serial, signers: accepted.signers, products: reports)
    }

    /// The same fetch as an async sequence of events, ending with the report; cancelling the consuming task
    /// stops the transfers and keeps the partial files (the next run resumes).
    public static func events(_ options: FetchOptions) -> AsyncThrowingStream<FetchUpdate, Error> {
        AsyncThrowingStream { continuation in
            let cancellation = FetchCancellation()
            continuation.onTermination = { _ in cancellation.cancel() }
            WorkerThread.start(name: "hcpack-fetch") {
                do {
                    let report = try fetch(options, cancellation: cancellation) { continuation.yield(.event($0)) }
                    continuation.yield(.finished(report))
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
        }
    }

    // MARK: the catalog

    /// Steps 1 to 3 but the stored serial: the catalog and its note, fetched (or read) with size limits and
    /// checked before the JSON is parsed.
    static func loadCatalog(_ options: FetchOptions, downloader: Downloader) throws(HCPackError) -> AcceptedCatalog {
        let source = options.catalog
        let noteSource = options.catalogNote ?? source + ".hcsig"
        // The note first: it bounds what the catalog may be. Each is a URL or a path of its own (a pipeline may
        // hold the note it signed and check the catalog the CDN serves).
        let noteBytes =
            isURL(noteSource)
            ? try small(mirrored(noteSource, options), limit: maxNoteBytes, downloader: downloader)
            : try readLocal(noteSource, limit: maxNoteBytes, what: "note")
        let catalogBytes =
            isURL(source)
            ? try small(mirrored(source, options), limit: Catalog.maxBytes, downloader: downloader)
            : try readLocal(source, limit: Catalog.maxBytes, what: "catalog")
        return try CatalogAcceptance.accept(
            catalog: catalogBytes, note: noteBytes, source: source, noteSource: noteSource, trustedKeys: options.trustedKeys, now: options.now)
    }

    private static func small(_ urls: [String], limit: Int, downloader: Downloader) throws(HCPackError) -> [UInt8] {
        do {
            return try downloader.fetchSmall(urls, limit: limit)
        } catch {
            throw HCPackError(error.failure.kind == .refused ? .invalidPackage : .io, error.failure.message, path: urls.first)
        }
    }

    private static func readLocal(_ path: String, limit: Int, what: String) throws(HCPackError) -> [UInt8] {
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such \(what); check the path", path: path)
        }
        guard status.kind == .file, status.size <= limit else {
            throw HCPackError(.invalidPackage, "\(path) is not a regular file of at most \(limit) bytes; fetch the \(what) again", path: path)
        }
        return try FileSystem.readFile(path, limit: limit)
    }

    /// Rollback: the serial must not be below the highest accepted in DIR under any trusted key (during a key
    /// rotation, a replayed catalog of the other key is still old); then it becomes the mark.
    static func checkSerial(_ accepted: AcceptedCatalog, store: FetchStore) throws(HCPackError) {
        let serial = accepted.catalog.serial
        let highest = try store.acceptedSerial()
        if let highest, serial < highest {
            let signers = accepted.signers.map { "\($0.name) (\($0.keyHash))" }.joined(separator: ", ")
            throw HCPackError(
                .invalidPackage,
                "the catalog (signed by \(signers)) has serial \(serial), lower than \(highest) already accepted in \(store.path): an old catalog is being replayed; nothing was changed",
                path: store.path)
        }
        if highest != serial { try store.recordSerial(serial) }
    }

    /// Which products: asked for, installed already, and the catalog's essential and prefetch ones.
    static func select(_ options: FetchOptions, catalog: Catalog, installed: [String]) throws(HCPackError) -> [CatalogPackage] {
        let offered = catalog.packages.map { "\($0.productIdentifier) \($0.version) (\($0.policy.rawValue))" }.joined(separator: ", ")
        if options.checkOnly { return catalog.packages }
        let known = Set(catalog.packages.map(\.productIdentifier))
        if let unknown = options.products.first(where: { !known.contains($0) }) {
            throw HCPackError(.invalidRequest, "the catalog has no product '\(unknown)'; it offers: \(offered.isEmpty ? "nothing" : offered)")
        }
        let installed = Set(installed)
        let wanted = catalog.packages.filter { package in
            options.products.contains(package.productIdentifier) || installed.contains(package.productIdentifier)
                || package.policy != .onDemand
        }
        guard !wanted.isEmpty else {
            throw HCPackError(
                .invalidRequest,
                "nothing to fetch: \(options.destination) has no receipts and the catalog marks no product essential or prefetch; pass --product ID (the catalog offers: \(offered.isEmpty ? "nothing" : offered))"
            )
        }
        return wanted
    }

    static func isURL(_ text: String) -> Bool {
        let lower = text.lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }

    /// `url`, then the same path relative to the catalog's folder under each mirror.
    static func mirrored(_ url: String, _ options: FetchOptions) -> [String] {
        guard !options.mirrors.isEmpty else { return [url] }
        var relative = String(url.split(separator: "/").last ?? "")
        if isURL(options.catalog), let slash = options.catalog.lastIndex(of: "/") {
            let base = options.catalog[...slash]
            if url.hasPrefix(base) { relative = String(url.dropFirst(base.count)) }
        }
        return [url] + options.mirrors.map { mirror in
            var base = mirror
            while base.hasSuffix("/") { base.removeLast() }
            return base + "/" + relative
        }
    }
}

/// An update of `Fetcher.events`: an event, then at the end the report.
public enum FetchUpdate: Sendable {
    case event(FetchEvent)
    case finished(FetchReport)
}

/// Hands events to the caller one at a time, and `downloading` at most every 250 ms per file.
final class SerialEmitter: Sendable {
    private let sink: @Sendable (FetchEvent) -> Void
    private let state = Mutex<[String: Date]>([:])

    init(_ sink: @escaping @Sendable (FetchEvent) -> Void) { self.sink = sink }

    func callAsFunction(_ event: FetchEvent) {
        state.withLock { last in
            if case .downloading(_, let file, let bytes, let total) = event, bytes < total {
                let now = Date()
                if let previous = last[file], now.timeIntervalSince(previous) < 0.25 { return }
                last[file] = now
            }
            sink(event)
        }
    }
}
