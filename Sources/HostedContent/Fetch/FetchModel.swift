import Foundation
import HTTPTransport

/// Settings for `Fetcher.fetch` (docs/fetch.md).
public struct FetchOptions: Sendable {
    /// The catalog: an http(s) URL or a local path.
    public var catalog: String
    /// Its note; nil for `CATALOG.hcsig`.
    public var catalogNote: String?
    /// The keys the catalog must be signed by (one is enough).
    public var trustedKeys: [VerifierKey]
    /// The folder to install into (must exist), or with `checkOnly`, to download into.
    public var destination: String
    /// Products asked for, besides those DIR has receipts for and the catalog's essential and prefetch ones.
    public var products: [String]
    /// Download every archive and delta the catalog names into `destination` and verify them; install nothing.
    public var checkOnly: Bool
    /// Hash installed files against their receipt and restore missing or changed ones from the archive.
    public var repair: Bool
    /// Other bases with the same relative paths, tried in order when the catalog's host fails.
    public var mirrors: [String]
    /// Transfers in parallel (essential products are installed first, one at a time).
    public var jobs: Int
    /// Transport limits: redirects, timeouts, the stall window, the CA file.
    public var http: HTTPLimits
    /// Retries and backoff.
    public var retry: RetryPolicy
    /// Rules and read limits for verifying and installing each archive.
    public var verify: VerifyOptions
    /// The time expiry is checked against.
    public var now: Date

    public init(catalog: String, trustedKeys: [VerifierKey], destination: String) {
        self.catalog = catalog
        self.trustedKeys = trustedKeys
        self.destination = destination
        products = []
        checkOnly = false
        repair = false
        mirrors = []
        jobs = 1
        http = HTTPLimits()
        retry = RetryPolicy()
        verify = VerifyOptions()
        now = Date()
    }
}

extension FetchOptions {
    /// The largest archive or delta downloaded: `verify.maxSize` (the content limit the install applies) plus an
    /// eighth and 64 KiB for the archive's own headers and plist. A larger one is refused before any byte of
    /// it is fetched: the install would refuse its content anyway.
    public var largestDownload: Int64 {
        let size = max(0, verify.maxSize)
        let (total, overflow) = size.addingReportingOverflow(size / 8 + (64 << 10))
        return overflow ? Int64.max : total
    }
}

/// Full archive or delta.
public enum FetchMethod: String, Sendable {
    case full
    case delta
}

/// What happened to one product.
public enum FetchStatus: String, Sendable {
    /// Installed, upgraded or repaired.
    case installed
    /// Already at the catalog's version (or newer): only the catalog was downloaded.
    case upToDate
    /// `checkOnly`: every file matched the catalog and the package rules.
    case checked
    /// Refused or unavailable; see the message.
    case failed
}

/// One state change of a fetch, in order per product (`--progress json` prints one per line).
public enum FetchEvent: Sendable, Equatable {
    /// The catalog was accepted.
    case catalogAccepted(serial: Int64, signers: [NoteSigner])
    /// The product will be looked at.
    case queued(product: String, policy: DownloadPolicy)
    /// Bytes are arriving (at most a few of these a second per product).
    case downloading(product: String, file: String, bytes: Int64, total: Int64)
    /// A download finished; its size and SHA-256 matched the catalog's.
    case verifying(product: String, file: String)
    /// The installer runs.
    case installing(product: String, version: String, method: FetchMethod)
    /// A delta was refused; the full archive comes next.
    case fallingBack(product: String, reason: String)
    /// Done for this product.
    case installed(product: String, version: String, method: FetchMethod)
    /// Nothing to do.
    case upToDate(product: String, version: String)
    /// `checkOnly`: every file of the product matched.
    case checked(product: String, files: Int)
    /// Stopped for this product; `resumable`: a rerun continues from the bytes on disk.
    case failed(product: String, reason: String, resumable: Bool)
}

/// One product's outcome.
public struct FetchProductReport: Sendable, Equatable {
    public var productIdentifier: String
    public var policy: DownloadPolicy
    /// The version installed before, if any.
    public var fromVersion: String?
    /// The catalog's version.
    public var toVersion: String
    /// How it got there; nil when nothing was downloaded.
    public var method: FetchMethod?
    public var status: FetchStatus
    /// Bytes received over the network for this product.
    public var downloadedBytes: Int64
    /// Bytes kept from an earlier run's partial download.
    public var resumedBytes: Int64
    /// Why it failed, or a note (a fallback from a delta).
    public var message: String?
    /// For a failure: whether it refused bytes or replies (exit 1) rather than the network or disk failing (exit 3).
    public var refused: Bool
}

/// What a fetch did.
public struct FetchReport: Sendable, Equatable {
    /// The accepted catalog's serial.
    public var serial: Int64
    /// Who signed it.
    public var signers: [NoteSigner]
    /// One per product looked at, essential ones first, then by product.
    public var products: [FetchProductReport]

    /// Whether any product failed.
    public var hasFailures: Bool { products.contains { $0.status == .failed } }
    /// Whether any failure was a refusal (signature, hash, rules, a lying server) rather than the environment.
    public var hasRefusals: Bool { products.contains { $0.status == .failed && $0.refused } }
}
