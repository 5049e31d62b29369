import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A published release for fetch tests: packages built with hcpack, a delta, a signing key, and catalogs signed
/// for a base URL, all under `www/` of one temporary folder.
final class FetchCorpus {
    let folder = TemporaryFolder()
    var www: String { folder.url("www") }
    var key: String { folder.url("release.key") }
    var pub: String { folder.url("release.key.pub") }

    static let v1: [(String, String)] = [
        ("index.json", "{\"title\": \"Levels\"}\n"), ("levels/1.json", "{\"level\": 1}\n"), ("levels/2.json", "{\"level\": 2}\n"),
        ("old/gone.txt", "removed in 1.1\n"),
    ]
    static let v2: [(String, String)] = [
        ("index.json", "{\"title\": \"Levels\"}\n"), ("levels/1.json", "{\"level\": 1, \"hard\": true}\n"),
        ("levels/2.json", "{\"level\": 2}\n"), ("levels/3.json", "{\"level\": 3}\n"),
    ]

    init() {
        folder.makeFolder("www")
        let made = hcpack(["keygen", "--name", "example.com/release", "-o", key])
        #expect(made.status == 0, "\(made.stderr)")
    }

    /// Builds `www/NAME` from `files` (plus `big` bytes of incompressible data in `big-NAME.bin`, stored).
    @discardableResult
    func build(_ name: String, product: String = "com.example.levels", version: String, files: [(String, String)], big: Int = 0) -> String {
        let source = "src-\(name)"
        for (path, text) in files { folder.write("\(source)/Contents/" + path, text) }
        var listed = files.map(\.0)
        if big > 0 {
            var generator = SystemRandomNumberGenerator()
            folder.write("\(source)/Contents/big-\(name).bin", (0..<big).map { _ in UInt8.random(in: 0...255, using: &generator) })
            listed.append("big-\(name).bin")
        }
        folder.write(
            "\(source)/ContentInfo.plist",
            plistXML(
                """
                <key>IAPProductIdentifier</key><string>\(product)</string>
                <key>ContentVersion</key><string>\(version)</string>
                \(filesXML(listed))
                """))
        let output = folder.url("www/" + name)
        let result = hcpack(["build", folder.url(source), "-o", output, "-q"])
        #expect(result.status == 0, "\(result.stderr)")
        return output
    }

    /// Levels 1.0 and 1.1 and the delta between them.
    func standard() {
        build("levels-1.0.zip", version: "1.0", files: Self.v1)
        build("levels-1.1.zip", version: "1.1", files: Self.v2)
        let delta = hcpack(["delta", folder.url("www/levels-1.0.zip"), folder.url("www/levels-1.1.zip"), "-o", folder.url("www/levels-1.0-1.1.zip"), "-q"])
        #expect(delta.status == 0, "\(delta.stderr)")
    }

    /// Writes `www/PREFIX/catalog.json` (and its note) naming `archives` under `baseURL`, signed by `signKey`
    /// (default: the release key).
    @discardableResult
    func publish(
        _ archives: [String], baseURL: String, prefix: String = "", serial: Int = 1, expires: String? = nil, extra: [String] = [],
        signKey: String? = nil
    ) -> String {
        let output = folder.url("www/" + (prefix.isEmpty ? "" : prefix + "/") + "catalog.json")
        var arguments = ["catalog"] + archives.map { folder.url("www/" + $0) }
        arguments += ["--base-url", baseURL, "-o", output, "--serial", "\(serial)", "--sign-key", signKey ?? key, "-q"] + extra
        if let expires { arguments += ["--expires", expires] }
        if !prefix.isEmpty { folder.makeFolder("www/" + prefix) }
        let result = hcpack(arguments)
        #expect(result.status == 0, "\(result.stderr)")
        return output
    }

    /// A folder to install into.
    func destination(_ name: String) -> String {
        folder.makeFolder(name)
        return folder.url(name)
    }

    /// A new folder `name` with `archives` (under `www/`) installed in turn by `hcpack install`.
    @discardableResult
    func installed(_ archives: [String], into name: String) -> String {
        let dest = destination(name)
        for archive in archives {
            let result = hcpack(["install", folder.url("www/" + archive), "--dest", dest, "-q"])
            #expect(result.status == 0, "\(result.stderr)")
        }
        return dest
    }

    /// Every file under `path` but `.hcpack/fetch`, with its size and a hash of its bytes (folders: "/"): what a
    /// fetch must leave as a direct install does.
    func snapshot(_ path: String) -> [String: String] {
        var result: [String: String] = [:]
        guard let walker = FileManager.default.enumerator(atPath: path) else { return result }
        while let relative = walker.nextObject() as? String {
            if relative.hasPrefix(".hcpack/fetch") || relative == ".hcpack/lock" { continue }
            var isFolder: ObjCBool = false
            FileManager.default.fileExists(atPath: path + "/" + relative, isDirectory: &isFolder)
            if isFolder.boolValue {
                result[relative] = "/"
            } else {
                var bytes = FileManager.default.contents(atPath: path + "/" + relative) ?? Data()
                // A receipt fetch wrote names the catalog its version came from; install's does not. The rest must be equal.
                if relative.hasPrefix(".hcpack/receipts/"), var receipt = jsonObject(String(decoding: bytes, as: UTF8.self)) {
                    receipt["catalog"] = nil
                    bytes = (try? JSONSerialization.data(withJSONObject: receipt, options: [.sortedKeys])) ?? bytes
                }
                // FNV-1a: a short, stable name for the bytes, so a failed comparison stays readable.
                let hash = bytes.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
                result[relative] = "\(bytes.count):\(String(hash, radix: 16))"
            }
        }
        return result
    }

    /// The `catalog` of `product`'s receipt in `destination`: the serial and signers fetch recorded.
    func receiptCatalog(_ destination: String, _ product: String = "com.example.levels") -> [String: Any]? {
        let bytes = FileManager.default.contents(atPath: destination + "/.hcpack/receipts/\(product).json") ?? Data()
        return jsonObject(String(decoding: bytes, as: UTF8.self))?["catalog"] as? [String: Any]
    }

    /// Sizes of the partial downloads in DIR's bookkeeping folder.
    func partials(_ destination: String) -> [String: Int64] {
        let fetch = destination + "/.hcpack/fetch"
        var sizes: [String: Int64] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: fetch)) ?? [] where name.hasSuffix(".download") {
            sizes[name] = ((try? FileManager.default.attributesOfItem(atPath: fetch + "/" + name))?[.size] as? NSNumber)?.int64Value
        }
        return sizes
    }

    func size(_ name: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: folder.url("www/" + name)))?[.size] as? NSNumber)?.int64Value ?? -1
    }
}

/// A free TCP port on 127.0.0.1 (bound, read back, released).
func freePort() -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts connections on 127.0.0.1:`port`.
func accepts(_ port: Int) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// Waits (bounded: 10 s) until `port` accepts connections.
func waitForPort(_ port: Int) -> Bool {
    for _ in 0..<400 {
        if accepts(port) { return true }
        usleep(25_000)
    }
    return false
}

/// A CA and a certificate for 127.0.0.1 made by openssl, for TLS tests.
struct TestCertificates {
    let ca: String
    let certificate: String
    let key: String

    init?(in folder: TemporaryFolder) {
        let dir = folder.url("tls")
        folder.makeFolder("tls")
        folder.write("tls/server.ext", "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
        let steps: [[String]] = [
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "\(dir)/ca.key", "-out",
                "\(dir)/ca.pem", "-days", "2", "-subj", "/CN=hcpack test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "\(dir)/server.key", "-out",
                "\(dir)/server.csr", "-subj", "/CN=127.0.0.1",
            ],
            [
                "x509", "-req", "-in", "\(dir)/server.csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key", "-CAcreateserial", "-out",
                "\(dir)/server.pem", "-days", "2", "-extfile", "\(dir)/server.ext",
            ],
        ]
        for step in steps {
            let result = run("openssl", step)
            guard result.status == 0 else {
                Issue.record("openssl \(step.prefix(2).joined(separator: " ")): \(result.output)")
                return nil
            }
        }
        ca = "\(dir)/ca.pem"
        certificate = "\(dir)/server.pem"
        key = "\(dir)/server.key"
    }
}

/// nginx (Debian's nginx-light, installed by make deps) serving `root` on a free loopback port, plain and
/// optionally with TLS; its access log records each request's URI, Range header, status and body bytes sent.
final class Nginx {
    let port: Int
    let tlsPort: Int?
    let prefix: String
    private let process = Process()

    var base: String { "http://127.0.0.1:\(port)" }
    var tlsBase: String { "https://127.0.0.1:\(tlsPort ?? 0)" }
    var accessLog: String { prefix + "/access.log" }

    /// - Parameters:
    ///   - rateLimit: nginx `limit_rate` for archives (e.g. "200k"), to make transfers last.
    init?(root: String, folder: TemporaryFolder, tls: TestCertificates? = nil, rateLimit: String? = nil) {
        prefix = folder.url("nginx")
        folder.makeFolder("nginx/tmp")
        port = freePort()
        tlsPort = tls == nil ? nil : freePort()
        var tlsServer = ""
        if let tls, let tlsPort {
            tlsServer = """
                server {
                  listen 127.0.0.1:\(tlsPort) ssl;
                  ssl_certificate \(tls.certificate);
                  ssl_certificate_key \(tls.key);
                  root \(root);
                  location ~ ^/tohttp/(.*\\.zip)$ { return 302 http://127.0.0.1:\(port)/$1; }
                  location ~ ^/tofile/(.*\\.zip)$ { return 302 file:///etc/hostname; }
                }
                """
        }
        let user = getuid() == 0 ? "user root;" : ""
        folder.write(
            "nginx/nginx.conf",
            """
            \(user)
            daemon off;
            worker_processes 1;
            pid \(prefix)/nginx.pid;
            error_log \(prefix)/error.log;
            events { worker_connections 64; }
            http {
              log_format counted '$uri "$http_range" $status $body_bytes_sent';
              access_log \(prefix)/access.log counted;
              client_body_temp_path \(prefix)/tmp;
              proxy_temp_path \(prefix)/tmp;
              fastcgi_temp_path \(prefix)/tmp;
              uwsgi_temp_path \(prefix)/tmp;
              scgi_temp_path \(prefix)/tmp;
              types { application/zip zip; application/json json; }
              server {
                listen 127.0.0.1:\(port);
                root \(root);
                location ~ \\.zip$ { \(rateLimit.map { "limit_rate \($0);" } ?? "") }
                location ~ ^/loop/ { return 302 /loop/again; }
              }
              \(tlsServer)
            }
            """)
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        process.arguments = ["-c", prefix + "/nginx.conf", "-p", prefix, "-e", prefix + "/error.log"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch {
            Issue.record("nginx did not start: \(error) (make deps installs nginx-light)")
            return nil
        }
        guard waitForPort(port), tlsPort.map(waitForPort) ?? true else {
            Issue.record("nginx does not accept connections: \(String(decoding: FileManager.default.contents(atPath: prefix + "/error.log") ?? Data(), as: UTF8.self))")
            process.terminate()
            return nil
        }
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }

    /// Access log lines: (uri, range header, status, body bytes sent).
    func requests() -> [(uri: String, range: String, status: Int, bytes: Int64)] {
        // nginx writes the log line when the request ends; give a just-finished one a moment (bounded).
        let text = String(decoding: FileManager.default.contents(atPath: accessLog) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "\"")
            guard parts.count == 3 else { return nil }
            let tail = parts[2].split(separator: " ")
            guard tail.count == 2, let status = Int(tail[0]), let bytes = Int64(tail[1]) else { return nil }
            return (String(parts[0].trimmingCharacters(in: .whitespaces)), String(parts[1]), status, bytes)
        }
    }
}

/// The tests' own misbehaving server (Python's http.server), for the faults nginx will not commit.
final class FaultServer {
    /// The standard corpus (1.0, 1.1 and their delta) and a fault server over its `www/`.
    static func withStandardCorpus(sourceLocation: SourceLocation = #_sourceLocation) throws -> (FetchCorpus, FaultServer) {
        let corpus = FetchCorpus()
        corpus.standard()
        let server = try #require(FaultServer(root: corpus.www, folder: corpus.folder), sourceLocation: sourceLocation)
        return (corpus, server)
    }

    let port: Int
    let log: String
    private let process = Process()

    var base: String { "http://127.0.0.1:\(port)" }

    init?(root: String, folder: TemporaryFolder) {
        let script = folder.write("fault_server.py", FaultServer.script)
        log = folder.url("fault.log")
        let portFile = folder.url("fault.port")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, root, portFile, log]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: folder.write("fault.err", "")) ?? FileHandle.nullDevice
        do { try process.run() } catch {
            Issue.record("python3 did not start: \(error)")
            return nil
        }
        var found: Int?
        for _ in 0..<400 where found == nil {
            if let text = folder.read("fault.port").map({ String(decoding: $0, as: UTF8.self) }), text.hasSuffix("\n") {
                found = Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
            } else {
                usleep(25_000)
            }
        }
        guard let found, waitForPort(found) else {
            Issue.record("the fault server did not start: \(String(decoding: folder.read("fault.err") ?? [], as: UTF8.self))")
            process.terminate()
            return nil
        }
        port = found
    }

    deinit {
        // SIGKILL: a child of the test process may inherit a mask that blocks SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// The requests it answered for `scenario`: (path, Range header, status, body bytes sent).
    func requests(_ scenario: String) -> [(path: String, range: String, status: Int, bytes: Int64)] {
        let text = String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").compactMap { line in
            guard let object = jsonObject(String(line)), object["scenario"] as? String == scenario else { return nil }
            return (
                object["path"] as? String ?? "", object["range"] as? String ?? "", (object["status"] as? NSNumber)?.intValue ?? 0,
                (object["sent"] as? NSNumber)?.int64Value ?? 0
            )
        }
    }

    /// Serves ROOT; the first path segment names the fault applied to .zip files (catalogs and notes are served
    /// as they are, from ROOT/<scenario>/ or ROOT/). Python 3.11 (Debian 12) and newer.
    static let script = #"""
        import http.server, json, os, signal, socket, sys, threading, time

        # Started by a test process whose threads may block signals: take SIGTERM back.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

        root, port_file, log_file = sys.argv[1], sys.argv[2], sys.argv[3]
        attempts = {}
        lock = threading.Lock()

        def log(entry):
            with lock:
                with open(log_file, "a") as f:
                    f.write(json.dumps(entry) + "\n")

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                parts = self.path.split("?")[0].lstrip("/").split("/", 1)
                scenario, rest = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
                name = rest.split("/")[-1]
                path = os.path.join(root, scenario, name)
                if not os.path.isfile(path):
                    path = os.path.join(root, name)
                entry = {"scenario": scenario, "path": name, "range": self.headers.get("Range", ""),
                         "ifRange": self.headers.get("If-Range", ""), "status": 0, "sent": 0}
                if not name.endswith(".zip"):
                    small = getattr(self, "small_" + scenario.replace("-", "_"), None)
                    if small is not None and name == "catalog.json":
                        return small(entry)
                    return self.plain(path, entry)
                with lock:
                    attempts[(scenario, name)] = attempts.get((scenario, name), 0) + 1
                    attempt = attempts[(scenario, name)]
                data = open(path, "rb").read()
                getattr(self, "fault_" + scenario.replace("-", "_"))(data, attempt, entry)

            def plain(self, path, entry):
                if not os.path.isfile(path):
                    return self.status(404, entry)
                data = open(path, "rb").read()
                self.send(200, data, entry, {})

            # Each reply is logged before its last byte is written, so a test reading the log after the client
            # finished sees it.
            def status(self, code, entry, headers={}):
                entry["status"] = code
                log(entry)
                self.send_response(code)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def send(self, code, body, entry, headers, length=None, cut=None):
                self.send_response(code)
                for key, value in headers.items():
                    self.send_header(key, value)
                if length is not False:
                    self.send_header("Content-Length", str(len(body) if length is None else length))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                payload = body if cut is None else body[:cut]
                entry["status"] = code
                entry["sent"] = len(payload)
                log(entry)
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
                if cut is not None:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)

            def ranged(self, data, entry, etag='"v1"', start=None, total=None):
                # A correct server: honours Range, and If-Range against its current ETag.
                header = self.headers.get("Range", "")
                if_range = self.headers.get("If-Range")
                if header.startswith("bytes=") and (if_range is None or if_range == etag):
                    first = int(header[6:].split("-")[0])
                    begin = first if start is None else start
                    body = data[first:]
                    crange = "bytes %d-%d/%d" % (begin, begin + len(body) - 1, len(data) if total is None else total)
                    return self.send(206, body, entry, {"ETag": etag, "Content-Range": crange})
                self.send(200, data, entry, {"ETag": etag})

            def fault_drop(self, data, attempt, entry):
                if attempt == 1:
                    return self.send(200, data, entry, {"ETag": '"v1"'}, cut=len(data) // 2)
                self.ranged(data, entry)

            def fault_norange(self, data, attempt, entry):
                if attempt == 1:
                    return self.send(200, data, entry, {"ETag": '"v1"'}, cut=len(data) // 2)
                self.send(200, data, entry, {"ETag": '"v1"'})

            def fault_badrange(self, data, attempt, entry):
                if attempt == 1:
                    return self.send(200, data, entry, {"ETag": '"v1"'}, cut=len(data) // 2)
                if attempt == 2:
                    return self.ranged(data, entry, start=0)
                self.ranged(data, entry)

            def fault_etag(self, data, attempt, entry):
                if attempt == 1:
                    return self.send(200, data, entry, {"ETag": '"v1"'}, cut=len(data) // 2)
                self.ranged(data, entry, etag='"v2"')

            def fault_error500(self, data, attempt, entry):
                if attempt <= 2:
                    return self.status(500, entry)
                self.ranged(data, entry)

            def fault_busy(self, data, attempt, entry):
                if attempt == 1:
                    return self.status(429, entry, {"Retry-After": "1"})
                self.ranged(data, entry)

            def fault_missing(self, data, attempt, entry):
                self.status(404, entry)

            def fault_long(self, data, attempt, entry):
                self.send(200, data + b"\0" * 4096, entry, {"ETag": '"v1"'}, length=False)

            def fault_gzip(self, data, attempt, entry):
                self.send(200, data, entry, {"Content-Encoding": "gzip"})

            def fault_loop(self, data, attempt, entry):
                self.status(302, entry, {"Location": self.path})

            def fault_tofile(self, data, attempt, entry):
                self.status(302, entry, {"Location": "file:///etc/hostname"})

            def fault_stall(self, data, attempt, entry):
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                entry["status"] = 200
                entry["sent"] = 100
                log(entry)
                self.end_headers()
                self.wfile.write(data[:100])
                self.wfile.flush()
                time.sleep(20)
                self.close_connection = True

            def trickle(self, chunks, entry, length, limit=20):
                # Sends each chunk 0.25 s after the last (at most `limit` seconds, then closes), after a head that
                # announces `length` bytes.
                self.send_response(200)
                self.send_header("Content-Length", str(length))
                entry["status"] = 200
                log(entry)
                self.end_headers()
                started = time.monotonic()
                try:
                    for chunk in chunks:
                        if time.monotonic() - started > limit:
                            break
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        time.sleep(0.25)
                except OSError:
                    pass
                self.close_connection = True

            def small_busycatalog(self, entry):
                # 429 with Retry-After: 1 to the first request for the catalog, then the catalog.
                with lock:
                    attempts[("busycatalog", "catalog.json")] = attempts.get(("busycatalog", "catalog.json"), 0) + 1
                    attempt = attempts[("busycatalog", "catalog.json")]
                if attempt == 1:
                    return self.status(429, entry, {"Retry-After": "1"})
                self.plain(os.path.join(root, "busycatalog", "catalog.json"), entry)

            def small_slowcatalog(self, entry):
                # A catalog announced as 64 MiB and sent as 1 KiB of white space every 0.25 s: 4 KiB/s, above the
                # rate floor, so only a deadline ends it.
                self.trickle((b" " * 1024 for _ in range(65536)), entry, 64 << 20)

            def fault_trickle(self, data, attempt, entry):
                # The archive, 64 bytes every 0.25 s (256 B/s).
                self.trickle((data[i:i + 64] for i in range(0, len(data), 64)), entry, len(data), limit=60)

            def fault_good(self, data, attempt, entry):
                self.ranged(data, entry)

            def fault_swap(self, data, attempt, entry):
                self.send(200, bytes(reversed(data)), entry, {"ETag": '"v1"'})

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        with open(port_file + ".tmp", "w") as f:
            f.write("%d\n" % server.server_address[1])
        os.rename(port_file + ".tmp", port_file)
        server.serve_forever()
        """#
}
