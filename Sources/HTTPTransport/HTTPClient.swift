internal import CCurl
import Foundation

/// Settings every transfer of an `HTTPClient` uses: what is allowed, and how long anything may take.
public struct HTTPLimits: Sendable, Equatable {
    /// Redirects followed at most (`CURLOPT_MAXREDIRS`); only to http(s), never from https to http.
    public var maxRedirects: Int = 5
    /// Seconds to connect, TLS handshake included (`CURLOPT_CONNECTTIMEOUT`).
    public var connectTimeout: Int = 15
    /// A transfer slower than `lowSpeedBytes` a second for `lowSpeedSeconds` is cut (a stall included):
    /// `CURLOPT_LOW_SPEED_LIMIT` and `CURLOPT_LOW_SPEED_TIME`.
    public var lowSpeedBytes: Int = 1024
    /// See `lowSpeedBytes`.
    public var lowSpeedSeconds: Int = 30
    /// Most bytes of one reply's header lines together; more cuts the transfer.
    public var maxHeaderBytes: Int = 64 << 10
    /// A PEM file of certificate authorities trusted instead of the system's (`CURLOPT_CAINFO`).
    public var caFile: String?
    /// The User-Agent header.
    public var userAgent: String = "hcpack"
    /// The libcurl shared object a client opens (`dlopen`) if no client has yet: libcurl.so.4. Package-only, for
    /// tests that name one that does not exist.
    package var curlLibrary: String = CurlLibrary.defaultName

    public init() {}
}

/// The status line and header fields of the reply a transfer ended on (after redirects).
public struct HTTPResponseHead: Sendable, Equatable {
    /// The status code (200, 206, 404, ...).
    public var status: Int
    /// Header fields by lower-case name; a repeated field keeps its last value.
    public var fields: [String: String]
    /// The URL that answered (the last redirect's target).
    public var url: String

    public init(status: Int, fields: [String: String], url: String) {
        self.status = status
        self.fields = fields
        self.url = url
    }

    /// The field `name` (lower case).
    public subscript(_ name: String) -> String? { fields[name] }
}

/// One GET: the URL, the extra request header fields (`Range`, `If-Range`) and how long it may take in all.
public struct HTTPRequest: Sendable, Equatable {
    public var url: String
    /// Extra header fields, in order, as (name, value).
    public var headers: [HTTPHeaderField]
    /// Seconds the whole transfer may take, connecting and redirects included (`CURLOPT_TIMEOUT_MS`); nil: no
    /// total bound (only the low-speed cut). Past it the transfer fails with `HTTPError.Kind.deadline`.
    public var deadline: Double?

    public init(url: String, headers: [HTTPHeaderField] = [], deadline: Double? = nil) {
        self.url = url
        self.headers = headers
        self.deadline = deadline
    }
}

/// A request header field.
public struct HTTPHeaderField: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// How a transfer ended without a transport failure.
public struct HTTPOutcome: Sendable, Equatable {
    /// The final reply's head.
    public var head: HTTPResponseHead
    /// False when the caller's `onHead` or `onBody` stopped the transfer before its end.
    public var completed: Bool
}

/// A transfer that failed below HTTP (DNS, connect, TLS, a stall, a refused redirect), from its `CURLcode`.
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure; decides whether a retry can help.
    public enum Kind: String, Sendable {
        /// Name resolution, connection, a dropped connection, a reply cut short: worth retrying.
        case connection
        /// Slower than the low-speed limit for the window (a stall): worth retrying.
        case stalled
        /// Not finished within the request's `deadline` (a server sending just fast enough, forever).
        case deadline
        /// The certificate did not verify, or the CA file is unusable: a retry does not help.
        case tls
        /// Too many redirects, or one to a scheme that is not allowed (file://, https to http).
        case redirect
        /// The reply's header lines exceed `maxHeaderBytes`, or are not HTTP.
        case malformedReply
        /// The URL is not http(s) or cannot be parsed.
        case badURL
        /// Anything else libcurl reports.
        case other
    }

    public var kind: Kind
    /// The URL asked for.
    public var url: String
    /// libcurl's message (`CURLOPT_ERRORBUFFER`, else `curl_easy_strerror`).
    public var message: String
    /// The `CURLcode`, for diagnostics.
    public var code: Int

    public var description: String { "\(url): \(message)" }
}

/// One libcurl easy handle, reused for every request it makes so connections are kept alive between them.
///
/// Not thread-safe: one client per thread (`--jobs` makes one per worker). Only http and https are allowed,
/// redirects are bounded and never leave https, certificates are always verified, content coding is asked to
/// be `identity` and never decoded.
public final class HTTPClient {
    private let curl: CurlLibrary
    private let handle: UnsafeMutableRawPointer
    private let limits: HTTPLimits
    private var errorBuffer: [CChar]

    /// A client with `limits`; `curl_easy_init`. The first client of the process loads libcurl
    /// (`CurlLibrary.shared`: `dlopen`, `dlsym`, `curl_global_init`).
    /// - Throws: `HTTPError` `.other` when libcurl cannot be loaded (the message names the library and the
    ///   Debian package to install) or initialized.
    public init(limits: HTTPLimits) throws(HTTPError) {
        let curl = try CurlLibrary.named(limits.curlLibrary).get()
        guard let handle = curl.easyInit() else {
            throw HTTPError(kind: .other, url: "", message: "libcurl could not be initialized (curl_easy_init failed)", code: -1)
        }
        self.curl = curl
        self.handle = handle
        self.limits = limits
        errorBuffer = [CChar](repeating: 0, count: Int(ccurl_error_size()))
    }

    deinit { curl.easyCleanup(handle) }

    /// Performs a GET (`curl_easy_perform`). `onHead` sees the final reply's head before any body byte (or at
    /// the end for an empty body) and returns false to stop; `onBody` gets the body in pieces and returns false
    /// to stop; `onTick` is called about once a second and more while bytes move, and returns false to stop.
    /// - Returns: the head, and whether the transfer ran to its end.
    /// - Throws: `HTTPError` for a transport failure; a stop asked by a callback is not one.
    public func get(
        _ request: HTTPRequest, onHead: @escaping (HTTPResponseHead) -> Bool,
        onBody: @escaping (UnsafeRawBufferPointer) -> Bool, onTick: @escaping () -> Bool = { true }
    ) throws(HTTPError) -> HTTPOutcome {
        let lower = request.url.lowercased()
        guard lower.hasPrefix("https://") || lower.hasPrefix("http://") else {
            throw HTTPError(kind: .badURL, url: request.url, message: "only http:// and https:// URLs are fetched", code: -1)
        }
        let started = ContinuousClock.now
        let state = TransferState(
            url: request.url, maxHeaderBytes: limits.maxHeaderBytes, onHead: onHead, onBody: onBody, onTick: onTick,
            deadline: request.deadline.map { started + .milliseconds(Self.milliseconds($0)) })
        let unmanaged = Unmanaged.passRetained(state)
        defer { unmanaged.release() }
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl.slistFreeAll(headers) }
        // identity: a CDN that recompresses would change the bytes the catalog's SHA-256 names.
        for field in [HTTPHeaderField("Accept-Encoding", "identity")] + request.headers {
            headers = curl.slistAppend(headers, "\(field.name): \(field.value)")
        }
        curl.easyReset(handle)
        errorBuffer = [CChar](repeating: 0, count: errorBuffer.count)
        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { buffer in
            var rc = configure(request: request, headers: headers, context: unmanaged.toOpaque(), errorBuffer: buffer.baseAddress)
            if rc == CURLE_OK { rc = curl.easyPerform(handle) }
            return rc
        }
        let pastDeadline = { () -> HTTPError in
            HTTPError(
                kind: .deadline, url: request.url,
                message: "not finished within \(Self.seconds(request.deadline ?? 0)) s, the deadline of one attempt",
                code: Int(code.rawValue))
        }
        if state.deadlineReached { throw pastDeadline() }
        if state.stoppedByCaller {
            return HTTPOutcome(head: state.deliveredHead ?? state.currentHead(), completed: false)
        }
        if let failure = state.headerFailure {
            throw HTTPError(kind: .malformedReply, url: request.url, message: failure, code: Int(code.rawValue))
        }
        guard code == CURLE_OK else {
            // libcurl's own total timeout is a backstop a second later (the progress callback checks the deadline);
            // it shares its code with the low-speed cut, so the clock tells them apart.
            if code == CURLE_OPERATION_TIMEDOUT, let deadline = request.deadline,
                started.duration(to: .now) >= .milliseconds(Self.milliseconds(deadline))
            {
                throw pastDeadline()
            }
            throw error(code, url: request.url)
        }
        var effective: UnsafeMutablePointer<CChar>?
        var head = state.currentHead()
        if ccurl_getinfo_string(curl.easyGetinfo, handle, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK, let effective {
            head.url = String(cString: effective)
        }
        if state.deliveredHead == nil {
            // An empty body: the head was never handed over by the write callback.
            guard onHead(head) else { return HTTPOutcome(head: head, completed: false) }
        }
        return HTTPOutcome(head: head, completed: true)
    }

    private static let httpAndHTTPS = Int(CURLPROTO_HTTP) | Int(CURLPROTO_HTTPS)

    /// Sets the protocols allowed by name (`option`, libcurl 7.85 and later) or, where libcurl does not know
    /// that option (Ubuntu 22.04's 7.81), by the older bitmask option it replaced (number `olderOption`,
    /// deprecated since 7.85, so given by number rather than by its deprecated name).
    private func allowProtocols(_ option: CURLoption, _ names: String, olderOption: UInt32, mask: Int) -> CURLcode {
        let rc = ccurl_setopt_string(curl.easySetopt, handle, option, names)
        guard rc == CURLE_UNKNOWN_OPTION else { return rc }
        return ccurl_setopt_long(curl.easySetopt, handle, CURLoption(UInt32(CURLOPTTYPE_LONG) + olderOption), mask)
    }

    private func configure(
        request: HTTPRequest, headers: UnsafeMutablePointer<curl_slist>?, context: UnsafeMutableRawPointer,
        errorBuffer: UnsafeMutablePointer<CChar>?
    ) -> CURLcode {
        let https = request.url.lowercased().hasPrefix("https://")
        let setopt = curl.easySetopt
        let timeout = request.deadline.map { Self.milliseconds($0 + 1) } ?? 0
        let steps: [() -> CURLcode] = [
            { ccurl_setopt_pointer(setopt, self.handle, CURLOPT_ERRORBUFFER, errorBuffer) },
            { ccurl_setopt_string(setopt, self.handle, CURLOPT_URL, request.url) },
            { self.allowProtocols(CURLOPT_PROTOCOLS_STR, "http,https", olderOption: 181, mask: Self.httpAndHTTPS) },
            // A redirect from https may only go to https.
            {
                self.allowProtocols(
                    CURLOPT_REDIR_PROTOCOLS_STR, https ? "https" : "http,https", olderOption: 182,
                    mask: https ? Int(CURLPROTO_HTTPS) : Self.httpAndHTTPS)
            },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_FOLLOWLOCATION, 1) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_MAXREDIRS, self.limits.maxRedirects) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_CONNECTTIMEOUT, self.limits.connectTimeout) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_LOW_SPEED_LIMIT, self.limits.lowSpeedBytes) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_LOW_SPEED_TIME, self.limits.lowSpeedSeconds) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_TIMEOUT_MS, timeout) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_HTTP_CONTENT_DECODING, 0) },
            // 256 KiB a write callback instead of 16: fewer calls, fewer pwrites.
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_BUFFERSIZE, 256 << 10) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_NOSIGNAL, 1) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_SSL_VERIFYPEER, 1) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_SSL_VERIFYHOST, 2) },
            { ccurl_setopt_string(setopt, self.handle, CURLOPT_USERAGENT, self.limits.userAgent) },
            { ccurl_setopt_list(setopt, self.handle, CURLOPT_HTTPHEADER, headers) },
            { ccurl_setopt_write_function(setopt, self.handle, writeCallback) },
            { ccurl_setopt_pointer(setopt, self.handle, CURLOPT_WRITEDATA, context) },
            { ccurl_setopt_header_function(setopt, self.handle, headerCallback) },
            { ccurl_setopt_pointer(setopt, self.handle, CURLOPT_HEADERDATA, context) },
            { ccurl_setopt_xferinfo_function(setopt, self.handle, progressCallback) },
            { ccurl_setopt_pointer(setopt, self.handle, CURLOPT_XFERINFODATA, context) },
            { ccurl_setopt_long(setopt, self.handle, CURLOPT_NOPROGRESS, 0) },
            { self.limits.caFile.map { ccurl_setopt_string(setopt, self.handle, CURLOPT_CAINFO, $0) } ?? CURLE_OK },
        ]
        for step in steps {
            let rc = step()
            if rc != CURLE_OK { return rc }
        }
        return CURLE_OK
    }

    /// A deadline in whole milliseconds for libcurl (0 would mean none: at least 1).
    static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 0 else { return 1 }
        return max(1, Int(min(seconds * 1000, 1e15)))
    }

    /// Seconds for a message: whole when they are.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && value < 1e15 ? String(Int64(value)) : String(format: "%.1f", value)
    }

    /// The typed error for a failed `curl_easy_perform`.
    private func error(_ code: CURLcode, url: String) -> HTTPError {
        let detail = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let message = detail.isEmpty ? curl.easyStrerror(code).map { String(cString: $0) } ?? "CURLcode \(code.rawValue)" : detail
        let kind: HTTPError.Kind
        switch code {
        case CURLE_OPERATION_TIMEDOUT: kind = .stalled
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE,
            CURLE_GOT_NOTHING, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_COULDNT_RESOLVE_PROXY:
            kind = .connection
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            kind = .tls
        case CURLE_TOO_MANY_REDIRECTS, CURLE_UNSUPPORTED_PROTOCOL: kind = .redirect
        case CURLE_URL_MALFORMAT: kind = .badURL
        case CURLE_WEIRD_SERVER_REPLY: kind = .malformedReply
        default: kind = .other
        }
        return HTTPError(kind: kind, url: url, message: message, code: Int(code.rawValue))
    }
}

/// What the C callbacks share with one `get`: the header lines of the current reply and the caller's closures.
private final class TransferState {
    let url: String
    let maxHeaderBytes: Int
    let onHead: (HTTPResponseHead) -> Bool
    let onBody: (UnsafeRawBufferPointer) -> Bool
    let onTick: () -> Bool
    var status = 0
    var fields: [String: String] = [:]
    var headerBytes = 0
    var deliveredHead: HTTPResponseHead?
    var stoppedByCaller = false
    var headerFailure: String?
    /// When the request's deadline passes; the progress callback (about once a second at least) stops there.
    let deadline: ContinuousClock.Instant?
    var deadlineReached = false

    init(
        url: String, maxHeaderBytes: Int, onHead: @escaping (HTTPResponseHead) -> Bool,
        onBody: @escaping (UnsafeRawBufferPointer) -> Bool, onTick: @escaping () -> Bool, deadline: ContinuousClock.Instant?
    ) {
        self.deadline = deadline
        self.url = url
        self.maxHeaderBytes = maxHeaderBytes
        self.onHead = onHead
        self.onBody = onBody
        self.onTick = onTick
    }

    func currentHead() -> HTTPResponseHead { HTTPResponseHead(status: status, fields: fields, url: url) }

    /// One header line (status line included); false stops the transfer.
    func header(_ bytes: UnsafeRawBufferPointer) -> Bool {
        headerBytes += bytes.count
        guard headerBytes <= maxHeaderBytes else {
            headerFailure = "the reply's header is larger than \(maxHeaderBytes) bytes"
            return false
        }
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            // A new reply (after a redirect or a 100 Continue): start over.
            let parts = line.split(separator: " ", maxSplits: 2)
            status = parts.count >= 2 ? Int(parts[1]) ?? 0 : 0
            fields = [:]
            headerBytes = bytes.count
            return true
        }
        guard let colon = line.firstIndex(of: ":") else { return true }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        fields[name] = value
        return true
    }

    func body(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if deliveredHead == nil {
            let head = currentHead()
            deliveredHead = head
            guard onHead(head) else {
                stoppedByCaller = true
                return false
            }
        }
        guard onBody(bytes) else {
            stoppedByCaller = true
            return false
        }
        return true
    }

    func tick() -> Bool {
        if let deadline, ContinuousClock.now >= deadline {
            deadlineReached = true
            return false
        }
        guard onTick() else {
            stoppedByCaller = true
            return false
        }
        return true
    }
}

// The C callbacks: `userdata` is the TransferState of the running `get`. Returning a count other than the one
// given (or nonzero from the progress callback) makes libcurl stop with CURLE_WRITE_ERROR / CURLE_ABORTED_BY_CALLBACK.

private func writeCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    deliver(data, size * count, context) { $0.body($1) }
}

private func headerCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    deliver(data, size * count, context) { $0.header($1) }
}

/// Hands `total` bytes to the transfer's state; the count libcurl expects back, 0 to stop.
private func deliver(
    _ data: UnsafeMutablePointer<CChar>?, _ total: Int, _ context: UnsafeMutableRawPointer?,
    _ take: (TransferState, UnsafeRawBufferPointer) -> Bool
) -> Int {
    guard let context else { return 0 }
    guard total > 0, let data else { return total }
    let state = Unmanaged<TransferState>.fromOpaque(context).takeUnretainedValue()
    return take(state, UnsafeRawBufferPointer(start: data, count: total)) ? total : 0
}

private func progressCallback(
    _ context: UnsafeMutableRawPointer?, _ downloadTotal: curl_off_t, _ downloaded: curl_off_t, _ uploadTotal: curl_off_t,
    _ uploaded: curl_off_t
) -> Int32 {
    guard let context else { return 1 }
    return Unmanaged<TransferState>.fromOpaque(context).takeUnretainedValue().tick() ? 0 : 1
}
