import Foundation
import HostedContent
import Synchronization

/// `hcpack fetch CATALOG --trusted-key PUB --dest DIR`: from a signed catalog to installed content.
struct FetchCommand: Command {
    static let spec = CommandSpec(
        name: "fetch",
        summary: "Download and install what a signed catalog names, resumably; or check every file it names.",
        arguments: [ArgumentSpec("CATALOG", help: "The catalog: an https:// or http:// URL, or a local path (its note is CATALOG.hcsig).")],
        options: [
            SigningOptions.trustedKey,
            OptionSpec("dest", value: "DIR", help: "The folder to install into (must exist; required unless --check)."),
            OptionSpec("product", value: "ID", repeatable: true, help: "Install this product too (besides installed, essential and prefetch ones); repeatable."),
            OptionSpec("check", value: "DIR2", help: "Download every archive, delta and note the catalog names into DIR2 and verify them; install nothing."),
            OptionSpec("repair", help: "Hash installed files against their receipt; restore missing or changed ones from the archive."),
            OptionSpec("signature", value: "NOTE", help: "The catalog's note, a URL or path (default: CATALOG.hcsig)."),
            OptionSpec("mirror", value: "BASE_URL", repeatable: true, help: "The same relative paths under another base, tried in order when a host fails; repeatable."),
            OptionSpec("jobs", short: "j", value: "N", help: "Transfers in parallel (default 1; essential products first, one at a time)."),
            OptionSpec("cacert", value: "FILE", help: "Trust the certificate authorities in this PEM file instead of the system's."),
            OptionSpec("retries", value: "N", help: "Failed attempts tolerated per file before giving up (default 5)."),
            OptionSpec("retry-delay", value: "SECONDS", help: "First backoff, doubled per failure up to 30 s, with jitter (default 0.5)."),
            OptionSpec("stall-seconds", value: "S", help: "Cut a transfer slower than --min-rate for S seconds (default 30)."),
            OptionSpec("min-rate", value: "BYTES", help: "The rate floor, bytes a second, over --stall-seconds (default 1024)."),
            OptionSpec("connect-timeout", value: "S", help: "Seconds to connect, TLS included (default 15)."),
            OptionSpec(
                "timeout", value: "S",
                help: "Seconds one attempt at the note or the catalog may take; an archive gets S plus its size at --min-rate (default 60)."),
            OptionSpec("progress", value: "FORMAT", help: "json: one JSON object per line on stderr for each state change."),
            OptionSpec("json", help: "Print the final report as one JSON object on stdout."),
            OptionSpec("quiet", short: "q", help: "Print only errors."),
        ] + LimitOptions.options,
        discussion: """
            Products: those named with --product, those DIR has receipts for, and the catalog's essential and
            prefetch ones (essential first). The catalog's note is checked before the catalog is parsed; its serial
            may not go below the highest accepted in DIR (under any trusted key), nor may it be expired. Every
            attempt has a deadline (--timeout). Downloads resume across runs from DIR/.hcpack/fetch/ and reach no
            archive reader before their size and SHA-256 match the catalog's. A delta is used when DIR holds its
            base; if it is refused, the full archive is installed.
            Exit status: 0 every product installed, up to date (or checked), 1 refused (signature, serial, expiry,
            hash, package rules, a server that lies), 2 usage error (nothing selected: the products are listed),
            3 network or I/O failure (a rerun resumes). docs/fetch.md has the states, limits and a CDN checklist.
            """)

    let options: FetchOptions
    let progressJSON: Bool
    let json: Bool
    let quiet: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        let name = Self.spec.name
        guard let catalog = arguments.argument(0), !catalog.isEmpty else {
            throw UsageError("missing CATALOG (a URL or path of catalog.json)", command: name)
        }
        let keys = try SigningOptions.trustedKeys(arguments, context: context, command: name)
        guard !keys.isEmpty else { throw UsageError("missing --trusted-key PUB (the keys the catalog must be signed by)", command: name) }
        let check = arguments.value("check")
        let dest = arguments.value("dest")
        guard (check == nil) != (dest == nil) else {
            throw UsageError(
                check == nil ? "missing --dest DIR (the folder to install into)" : "--check DIR2 installs nothing; leave out --dest",
                command: name)
        }
        let isURL = catalog.lowercased().hasPrefix("http://") || catalog.lowercased().hasPrefix("https://")
        guard isURL || !catalog.contains("://") else {
            throw UsageError("CATALOG '\(catalog)' must be an http:// or https:// URL, or a local path", command: name)
        }
        var options = FetchOptions(
            catalog: isURL ? catalog : context.absolutePath(catalog), trustedKeys: keys, destination: context.absolutePath(check ?? dest ?? ""))
        options.checkOnly = check != nil
        options.repair = arguments.flag("repair")
        if options.repair && options.checkOnly { throw UsageError("--repair installs; --check does not: pass one of them", command: name) }
        options.products = arguments.values("product")
        if options.checkOnly && !options.products.isEmpty {
            throw UsageError("--check verifies every product of the catalog; leave out --product", command: name)
        }
        if let note = arguments.value("signature") {
            options.catalogNote = note.lowercased().hasPrefix("http") && note.contains("://") ? note : context.absolutePath(note)
        }
        options.mirrors = arguments.values("mirror")
        for mirror in options.mirrors where !(mirror.lowercased().hasPrefix("http://") || mirror.lowercased().hasPrefix("https://")) {
            throw UsageError("--mirror '\(mirror)' is not an http:// or https:// URL", command: name)
        }
        func positive(_ option: String, range: ClosedRange<Int64>) throws(UsageError) -> Int? {
            guard let value = try arguments.integer(option) else { return nil }
            guard range.contains(value) else {
                throw UsageError("--\(option) must be between \(range.lowerBound) and \(range.upperBound)", command: name)
            }
            return Int(value)
        }
        options.jobs = try positive("jobs", range: 1...64) ?? 1
        if let retries = try positive("retries", range: 0...100) { options.retry.maxFailures = retries }
        if let text = arguments.value("retry-delay") {
            guard let delay = Double(text), delay.isFinite, delay >= 0, delay <= 60 else {
                throw UsageError("--retry-delay needs seconds between 0 and 60, got '\(text)'", command: name)
            }
            options.retry.baseDelay = delay
        }
        if let stall = try positive("stall-seconds", range: 1...3600) { options.http.lowSpeedSeconds = stall }
        if let rate = try positive("min-rate", range: 1...(1 << 40)) { options.http.lowSpeedBytes = rate }
        if let timeout = try positive("connect-timeout", range: 1...600) { options.http.connectTimeout = timeout }
        if let timeout = try positive("timeout", range: 1...86400) { options.retry.attemptSeconds = Double(timeout) }
        try LimitOptions.apply(arguments, to: &options.verify, command: name)
        if let cacert = arguments.value("cacert") {
            let path = context.absolutePath(cacert)
            guard FileSystem.exists(path) else { throw UsageError("--cacert \(cacert): no such file", command: name) }
            options.http.caFile = path
        }
        options.http.userAgent = "hcpack/\(HCPack.version)"
        switch arguments.value("progress") {
        case nil: progressJSON = false
        case "json": progressJSON = true
        case let other?: throw UsageError("--progress takes json, got '\(other)'", command: name)
        }
        self.options = options
        json = arguments.flag("json")
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let renderer = FetchProgress(context: context, json: progressJSON, line: !progressJSON && !json && !quiet)
        let report: FetchReport
        do {
            report = try Fetcher.fetch(options) { event in renderer.show(event) }
        } catch {
            renderer.finish()
            throw error
        }
        renderer.finish()
        if json {
            context.out(Self.json(report).rendered() + "\n")
        } else {
            for product in report.products {
                let line = Self.text(product, destination: options.destination)
                if product.status == .failed {
                    context.err("hcpack: error: \(line)\n")
                } else if !quiet {
                    context.out(line + "\n")
                }
            }
        }
        if report.hasRefusals { return ExitCode.invalid }
        return report.hasFailures ? ExitCode.environment : ExitCode.success
    }

    static func text(_ product: FetchProductReport, destination: String) -> String {
        let id = product.productIdentifier
        var line: String
        switch product.status {
        case .upToDate: line = "\(id) \(product.fromVersion ?? product.toVersion) is up to date in \(destination)"
        case .checked: line = "\(id) \(product.toVersion): every file matches the catalog and the package rules (in \(destination))"
        case .installed:
            let from = product.fromVersion.map { " (was \($0))" } ?? ""
            line = "installed \(id) \(product.toVersion)\(from) in \(destination) from the \(product.method?.rawValue ?? "full") archive: "
            line += "\(product.downloadedBytes) bytes downloaded, \(product.resumedBytes) resumed"
        case .failed:
            line = "\(id): \(product.message ?? "failed")"
            line += product.refused ? "" : " (a rerun resumes)"
            return line
        }
        if let message = product.message { line += "; " + message }
        return line
    }

    static func json(_ report: FetchReport) -> JSONValue {
        .object([
            ("serial", .number(report.serial)),
            ("signers", .signers(report.signers)),
            (
                "products",
                .array(
                    report.products.map { product in
                        .object([
                            ("productIdentifier", .string(product.productIdentifier)),
                            ("policy", .string(product.policy.rawValue)),
                            ("fromVersion", product.fromVersion.map(JSONValue.string) ?? .null),
                            ("toVersion", .string(product.toVersion)),
                            ("method", product.method.map { .string($0.rawValue) } ?? .null),
                            ("status", .string(product.status.rawValue)),
                            ("downloadedBytes", .number(product.downloadedBytes)),
                            ("resumedBytes", .number(product.resumedBytes)),
                            ("message", product.message.map(JSONValue.string) ?? .null),
                        ])
                    })
            ),
        ])
    }
}

/// Shows fetch events: one JSON object per line (`--progress json`), or on a terminal one line per running
/// transfer (bytes, rate, time left) and a total line, redrawn in place.
final class FetchProgress: @unchecked Sendable {
    /// One running transfer: where it is, and where it was when first seen (for its rate).
    private struct Transfer {
        var bytes: Int64
        var total: Int64
        var start: Date
        var startBytes: Int64
    }

    private let sink: TextSink
    private let json: Bool
    private let line: Bool
    private let lock = NSLock()
    private var policies: [String: String] = [:]
    private var transfers: [String: Transfer] = [:]
    /// Bytes and totals of the transfers that finished, for the total line.
    private var finished: (bytes: Int64, total: Int64) = (0, 0)
    private var drawnLines = 0
    /// Longest file name shown, so a line fits a narrow terminal (a wrapped line would break the redraw).
    static let nameWidth = 32

    init(context: Context, json: Bool, line: Bool) {
        sink = context.standardError
        self.json = json
        self.line = line && context.standardErrorIsTerminal
    }

    func show(_ event: FetchEvent) {
        lock.lock()
        defer { lock.unlock() }
        if case .queued(let product, let policy) = event { policies[product] = policy.rawValue }
        if json {
            sink.write(Self.json(event, policy: { self.policies[$0] }).rendered(pretty: false) + "\n")
        } else if line {
            draw(event)
        }
    }

    /// Clears the lines before the summary is printed.
    func finish() {
        lock.lock()
        defer { lock.unlock() }
        redraw([])
    }

    private func draw(_ event: FetchEvent) {
        let now = Date()
        switch event {
        case .downloading(_, let file, let bytes, let total):
            let start = transfers[file] ?? Transfer(bytes: bytes, total: total, start: now, startBytes: bytes)
            transfers[file] = Transfer(bytes: bytes, total: total, start: start.start, startBytes: start.startBytes)
        case .verifying(_, let file):
            if let done = transfers.removeValue(forKey: file) {
                finished.bytes += done.bytes
                finished.total += done.total
            }
        default:
            return
        }
        var lines: [String] = []
        var rates = 0.0
        var bytes = finished.bytes
        var total = finished.total
        for (file, transfer) in transfers.sorted(by: { $0.key < $1.key }) {
            let seconds = now.timeIntervalSince(transfer.start)
            let rate = seconds > 0.2 ? Double(transfer.bytes - transfer.startBytes) / seconds : 0
            rates += rate
            bytes += transfer.bytes
            total += transfer.total
            lines.append(Self.line(Self.shortened(file), bytes: transfer.bytes, total: transfer.total, rate: rate))
        }
        if !lines.isEmpty { lines.append(Self.line("total", bytes: bytes, total: total, rate: rates)) }
        redraw(lines)
    }

    /// Replaces the lines drawn last with `lines`: back to the first one, erase to the end of the screen, write.
    private func redraw(_ lines: [String]) {
        guard drawnLines > 0 || !lines.isEmpty else { return }
        let up = drawnLines > 1 ? "\u{1B}[\(drawnLines - 1)A" : ""
        sink.write("\r" + up + "\u{1B}[J" + lines.joined(separator: "\n"))
        drawnLines = lines.count
    }

    /// `NAME BYTES/TOTAL RATE/s TIME left`.
    static func line(_ name: String, bytes: Int64, total: Int64, rate: Double) -> String {
        let left = rate > 0 ? duration(Double(max(0, total - bytes)) / rate) : "--"
        return "\(name) \(ProgressBar.bytes(bytes))/\(ProgressBar.bytes(total)) \(ProgressBar.bytes(Int64(rate)))/s \(left) left"
    }

    /// `42s`, `3m05s`, `2h07m`.
    static func duration(_ seconds: Double) -> String {
        let whole = Int(min(seconds.rounded(.up), 360_000))
        if whole < 60 { return "\(whole)s" }
        if whole < 3600 { return "\(whole / 60)m" + String(format: "%02ds", whole % 60) }
        return "\(whole / 3600)h" + String(format: "%02dm", whole / 60 % 60)
    }

    static func shortened(_ name: String) -> String {
        name.count <= nameWidth ? name : String(name.prefix(nameWidth - 1)) + "\u{2026}"
    }

    static func json(_ event: FetchEvent, policy: (String) -> String?) -> JSONValue {
        func product(_ name: String, _ state: String, _ rest: [(String, JSONValue)]) -> JSONValue {
            .object([("event", .string(state)), ("product", .string(name)), ("policy", policy(name).map(JSONValue.string) ?? .null)] + rest)
        }
        switch event {
        case .catalogAccepted(let serial, let signers):
            return .object([
                ("event", .string("catalog")), ("serial", .number(serial)),
                ("signers", .signers(signers)),
            ])
        case .queued(let name, _): return product(name, "queued", [])
        case .downloading(let name, let file, let bytes, let total):
            return product(name, "downloading", [("file", .string(file)), ("bytes", .number(bytes)), ("total", .number(total))])
        case .verifying(let name, let file): return product(name, "verifying", [("file", .string(file))])
        case .installing(let name, let version, let method):
            return product(name, "installing", [("version", .string(version)), ("method", .string(method.rawValue))])
        case .fallingBack(let name, let reason): return product(name, "fallback", [("reason", .string(reason))])
        case .installed(let name, let version, let method):
            return product(name, "installed", [("version", .string(version)), ("method", .string(method.rawValue))])
        case .upToDate(let name, let version): return product(name, "up-to-date", [("version", .string(version))])
        case .checked(let name, let files): return product(name, "checked", [("files", .number(Int64(files)))])
        case .failed(let name, let reason, let resumable):
            return product(name, "failed", [("reason", .string(reason)), ("resumable", .bool(resumable))])
        }
    }
}
