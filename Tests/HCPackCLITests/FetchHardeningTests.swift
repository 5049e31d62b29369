import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The outside review's fetch findings (issue 30): deadlines on every transfer, one rollback mark across keys,
/// planted bookkeeping, `--max-size`.
@Suite struct FetchHardeningTests {
    /// The SHA-256 the catalog at `path` gives its first package.
    func catalogSHA256(_ path: String) throws -> String {
        let catalog = try #require(jsonObject(String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)))
        let packages = try #require(catalog["packages"] as? [[String: Any]])
        return try #require(packages.first?["sha256"] as? String)
    }

    @Test("a catalog trickled above the rate floor is cut by --timeout: exit 3, a message naming the deadline, DIR untouched")
    func catalogDeadline() throws {
        let (corpus, server) = try FaultServer.withStandardCorpus()
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "slowcatalog", serial: 1)
        let dest = corpus.destination("app")
        let result = hcpack([
            "fetch", server.base + "/slowcatalog/catalog.json", "--trusted-key", corpus.pub, "--dest", dest, "--product",
            "com.example.levels", "--retries", "1", "--retry-delay", "0.01", "--min-rate", "100", "--stall-seconds", "1", "--timeout", "1",
        ])
        #expect(result.status == 3, "\(result.stderr)")
        #expect(result.stderr.contains("catalog.json: not finished within 1 s"), "\(result.stderr)")
        #expect(result.stderr.contains("gave up after 2 attempts") && result.stderr.contains("--timeout"), "\(result.stderr)")
        // Two attempts, each cut by the deadline (the note came first, whole).
        #expect(server.requests("slowcatalog").map(\.path) == ["catalog.json.hcsig", "catalog.json", "catalog.json"])
        #expect(corpus.snapshot(dest).isEmpty)
    }

    @Test("a 429 to the catalog with Retry-After is retried after the wait the server asked for, not the shorter backoff")
    func catalogRetryAfter() throws {
        let (corpus, server) = try FaultServer.withStandardCorpus()
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "busycatalog", serial: 1)
        let dest = corpus.destination("app")
        let started = Date()
        let result = hcpack([
            "fetch", server.base + "/busycatalog/catalog.json", "--trusted-key", corpus.pub, "--dest", dest, "--product",
            "com.example.levels", "--retry-delay", "0.01",
        ])
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests("busycatalog").map(\.status) == [200, 429, 200], "\(server.requests("busycatalog"))")
        // A lower bound only: the wait the server asked for happened (the backoff alone is 0.01 s).
        #expect(elapsed >= 1.0, "retried after \(elapsed) s")
    }

    @Test("--signature takes a path for a URL catalog and a URL for a local catalog")
    func noteAndCatalogFromDifferentPlaces() throws {
        let (corpus, server) = try FaultServer.withStandardCorpus()
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "good", serial: 1)
        let catalog = corpus.www + "/good/catalog.json"
        try #require(FileManager.default.fileExists(atPath: catalog) && FileManager.default.fileExists(atPath: catalog + ".hcsig"))
        let common = ["--trusted-key", corpus.pub, "--product", "com.example.levels"]
        let urlCatalog = hcpack(
            ["fetch", server.base + "/good/catalog.json", "--signature", catalog + ".hcsig", "--dest", corpus.destination("a")] + common)
        #expect(urlCatalog.status == 0, "\(urlCatalog.stderr)")
        let localCatalog = hcpack(
            ["fetch", catalog, "--signature", server.base + "/good/catalog.json.hcsig", "--dest", corpus.destination("b")] + common)
        #expect(localCatalog.status == 0, "\(localCatalog.stderr)")
        #expect(corpus.snapshot(corpus.folder.url("a")) == corpus.snapshot(corpus.folder.url("b")))
        #expect(!corpus.snapshot(corpus.folder.url("a")).isEmpty)
    }

    @Test("an up-to-date rerun removes what a kill left after the receipt (a staging folder, an unrenamed record) and downloads nothing but the catalog")
    func leftoversAfterReceipt() throws {
        let (corpus, server) = try FaultServer.withStandardCorpus()
        let catalog = corpus.publish(["levels-1.1.zip", "levels-1.0-1.1.zip"], baseURL: server.base + "/good", prefix: "good", serial: 1)
        let dest = corpus.destination("app")
        let fetch = ["fetch", server.base + "/good/catalog.json", "--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels"]
        #expect(hcpack(fetch).status == 0)
        // What a SIGKILL between writing the receipt and removing the staging folder leaves; one of a delta
        // install after its receipt (its download); one before a validator's rename.
        corpus.folder.write("app/.hcpack/staging-0123abcd/Contents/levels/1.json", "staged\n")
        corpus.folder.write("app/.hcpack/receipts/com.example.levels.json.tmp", "{")
        let catalogText = String(decoding: FileManager.default.contents(atPath: catalog) ?? Data(), as: UTF8.self)
        let packages = try #require(jsonObject(catalogText)?["packages"] as? [[String: Any]])
        let deltaSHA256 = try #require((packages.first?["deltas"] as? [[String: Any]])?.first?["sha256"] as? String)
        corpus.folder.write("app/.hcpack/fetch/\(deltaSHA256).download", "delta bytes")
        corpus.folder.write("app/.hcpack/fetch/\(deltaSHA256).download.http.tmp", "validator \"v1\"\n")
        let before = server.requests("good").count
        let rerun = hcpack(fetch + ["--json"])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(rerun.stdout.contains("\"status\": \"upToDate\""), "\(rerun.stdout)")
        #expect(server.requests("good").dropFirst(before).map(\.path) == ["catalog.json.hcsig", "catalog.json"])
        #expect(corpus.snapshot(dest) == corpus.snapshot(corpus.installed(["levels-1.1.zip"], into: "direct")))
        let bookkeeping = try FileManager.default.contentsOfDirectory(atPath: dest + "/.hcpack/fetch")
        #expect(!bookkeeping.contains { $0.hasSuffix(".tmp") || $0.contains(".download") }, "\(bookkeeping)")
    }

    @Test("an archive trickled below the rate floor but within the stall window is cut at --timeout plus its size at --min-rate; the partial resumes")
    func archiveDeadline() throws {
        let (corpus, server) = try FaultServer.withStandardCorpus()
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/trickle", prefix: "trickle", serial: 1)
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "good", serial: 1)
        let dest = corpus.destination("app")
        let size = corpus.size("levels-1.1.zip")
        // 256 B/s against a floor of 2000 B/s: the 30 s stall window does not end it in time; the deadline
        // (1 s + size / 2000) does, long before the trickle would finish.
        try #require(Double(size) / 256 > 2 * (1 + Double(size) / 2000), "the archive is too small for this test: \(size) bytes")
        let common = ["--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels", "--retries", "0", "--min-rate", "2000"]
        let cut = hcpack(["fetch", server.base + "/trickle/catalog.json", "--stall-seconds", "30", "--timeout", "1"] + common)
        #expect(cut.status == 3, "\(cut.stderr)")
        #expect(cut.stderr.contains("levels-1.1.zip: not finished within") && cut.stderr.contains("(a rerun resumes)"), "\(cut.stderr)")
        let kept = corpus.partials(dest).values.first ?? 0
        #expect(kept > 0 && kept < size, "\(corpus.partials(dest))")

        let resumed = hcpack(["fetch", server.base + "/good/catalog.json", "--json"] + common)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(server.requests("good").filter { $0.path == "levels-1.1.zip" }.map(\.range) == ["bytes=\(kept)-"])
    }

    @Test("rollback across a key rotation: after serial 9 under the new key, serial 3 under the old key is refused")
    func rollbackAcrossKeys() throws {
        let corpus = FetchCorpus()
        corpus.standard()
        let old = corpus.folder.url("old.key")
        #expect(hcpack(["keygen", "--name", "example.com/old", "-o", old]).status == 0)
        let server = try #require(FaultServer(root: corpus.www, folder: corpus.folder))
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "new", serial: 9)
        corpus.publish(["levels-1.0.zip"], baseURL: server.base + "/good", prefix: "old", serial: 3, signKey: old)
        let dest = corpus.destination("app")
        let keys = ["--trusted-key", corpus.pub, "--trusted-key", old + ".pub", "--dest", dest, "--product", "com.example.levels"]

        let current = hcpack(["fetch", server.base + "/new/catalog.json"] + keys)
        #expect(current.status == 0, "\(current.stderr)")
        let before = corpus.snapshot(dest)
        let replay = hcpack(["fetch", server.base + "/old/catalog.json"] + keys)
        #expect(replay.status == 1, "\(replay.stderr)")
        #expect(replay.stderr.contains("has serial 3, lower than 9 already accepted") && replay.stderr.contains("example.com/old"), "\(replay.stderr)")
        #expect(corpus.snapshot(dest) == before)
        #expect(corpus.folder.read("app/.hcpack/fetch/serial") == Array("9\n".utf8))
        #expect(!server.requests("good").contains { $0.path == "levels-1.0.zip" })
    }

    @Test("per-key marks of earlier hcpack count: the highest of them is the floor, and a newer serial replaces them (and the old installed-*.json)")
    func legacySerials() throws {
        let (corpus, server) = try FaultServer.withStandardCorpus()
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "nine", serial: 9)
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "thirteen", serial: 13)
        let dest = corpus.destination("app")
        corpus.folder.makeFolder("app/.hcpack/fetch")
        corpus.folder.write("app/.hcpack/fetch/serial-0a1b2c3d-example.com_old", "12\n")
        corpus.folder.write("app/.hcpack/fetch/serial-4e5f6a7b-example.com_release", "5\n")
        // Where earlier hcpack kept which catalog a version came from (the receipt has it now).
        corpus.folder.write("app/.hcpack/fetch/installed-com.example.levels.json", "{\"catalogSerial\" : 12}\n")
        let keys = ["--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels"]

        let replay = hcpack(["fetch", server.base + "/nine/catalog.json"] + keys)
        #expect(replay.status == 1 && replay.stderr.contains("lower than 12"), "\(replay.stderr)")
        let newer = hcpack(["fetch", server.base + "/thirteen/catalog.json"] + keys)
        #expect(newer.status == 0, "\(newer.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: dest + "/.hcpack/fetch").filter { $0 != "lock" }
        #expect(names == ["serial"])
        #expect((corpus.receiptCatalog(dest)?["serial"] as? NSNumber)?.int64Value == 13)
        #expect(corpus.folder.read("app/.hcpack/fetch/serial") == Array("13\n".utf8))
    }

    enum Planted: String, CaseIterable, Sendable {
        case symlink, hardLink, fifo, folder, oversizedValidator
    }

    @Test("a planted download (symlink, hard link, FIFO, folder) or an oversized validator file is removed, never followed; the download starts from zero", arguments: Planted.allCases)
    func plantedPartial(_ planted: Planted) throws {
        let (corpus, server) = try FaultServer.withStandardCorpus()
        let catalog = corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "good", serial: 1)
        let sha = try catalogSHA256(catalog)
        let dest = corpus.destination("app")
        corpus.folder.makeFolder("app/.hcpack/fetch")
        let outside = corpus.folder.write("outside.txt", "not fetch's\n")
        let partial = dest + "/.hcpack/fetch/\(sha).download"
        switch planted {
        case .symlink: try FileManager.default.createSymbolicLink(atPath: partial, withDestinationPath: outside)
        case .hardLink: #expect(link(outside, partial) == 0)
        case .fifo: #expect(mkfifo(partial, 0o644) == 0)
        case .folder: corpus.folder.write("app/.hcpack/fetch/\(sha).download/inner", "x")
        case .oversizedValidator:
            corpus.folder.write("app/.hcpack/fetch/\(sha).download", "half of something")
            corpus.folder.write("app/.hcpack/fetch/\(sha).download.http", String(repeating: "v", count: 20 << 10))
        }
        let result = hcpack([
            "fetch", server.base + "/good/catalog.json", "--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels",
            "--json",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let report = try #require((jsonObject(result.stdout)?["products"] as? [[String: Any]])?.first)
        #expect((report["resumedBytes"] as? NSNumber)?.int64Value == 0)
        #expect(server.requests("good").filter { $0.path == "levels-1.1.zip" }.map(\.range) == [""])
        #expect(corpus.folder.read("outside.txt") == Array("not fetch's\n".utf8))
        #expect(corpus.folder.read("app/levels/3.json") == Array("{\"level\": 3}\n".utf8))
        #expect(corpus.partials(dest).isEmpty)
    }

    @Test("--max-size: an archive past it (with room for headers) is refused before any byte is downloaded")
    func maxSizeBeforeDownload() throws {
        let corpus = FetchCorpus()
        corpus.build("big-1.0.zip", version: "1.0", files: FetchCorpus.v1, big: 100_000)
        let server = try #require(FaultServer(root: corpus.www, folder: corpus.folder))
        corpus.publish(["big-1.0.zip"], baseURL: server.base + "/good", prefix: "good", serial: 1)
        let dest = corpus.destination("app")
        let common = ["fetch", server.base + "/good/catalog.json", "--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels"]
        let refused = hcpack(common + ["--max-size", "1000"])
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("raise --max-size") && refused.stderr.contains("big-1.0.zip is \(corpus.size("big-1.0.zip")) bytes"), "\(refused.stderr)")
        #expect(server.requests("good").filter { $0.path == "big-1.0.zip" }.isEmpty)
        let usage = hcpack(common + ["--max-size", "0"])
        #expect(usage.status == 2, "\(usage.stderr)")
        let raised = hcpack(common + ["--max-size", "3000000000"])
        #expect(raised.status == 0, "\(raised.stderr)")
    }

    @Test("--max-size reaches the install: content past it is refused by the installer's rule, DIR as it was")
    func maxSizeAtInstall() throws {
        let (corpus, server) = try FaultServer.withStandardCorpus()
        corpus.publish(["levels-1.1.zip"], baseURL: server.base + "/good", prefix: "good", serial: 1)
        let dest = corpus.destination("app")
        let result = hcpack([
            "fetch", server.base + "/good/catalog.json", "--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels",
            "--max-size", "10",
        ])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("[content.too-large]"), "\(result.stderr)")
        #expect(corpus.snapshot(dest).keys.allSatisfy { $0.hasPrefix(".hcpack") })
    }
}

/// What `hcpack fetch` draws on a terminal: the built binary under a pseudo-terminal.
@Suite struct FetchTerminalTests {
    /// Runs `argv` with stderr on a pseudo-terminal (stdin and stdout elsewhere) and keeps what it wrote there.
    static let ptyScript = #"""
        import os, pty, subprocess, sys
        master, slave = pty.openpty()
        child = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not data:
                break
            chunks.append(data)
        child.wait()
        with open(sys.argv[1], "wb") as f:
            f.write(b"".join(chunks))
        sys.exit(child.returncode)
        """#

    @Test(
        "on a terminal: one line per running transfer (bytes, rate, time left) and a total line, redrawn in place, cleared at the end",
        .enabled(if: Requirement.pty.enabled, Requirement.pty.comment))
    func progressLines() throws {
        try Requirement.pty.require()
        let corpus = FetchCorpus()
        corpus.build("levels-a.zip", product: "com.example.a", version: "1.0", files: FetchCorpus.v1, big: 400_000)
        corpus.build("levels-b.zip", product: "com.example.b", version: "1.0", files: FetchCorpus.v1, big: 400_000)
        // About 1.3 s a transfer: several redraws with both running.
        let nginx = try #require(Nginx(root: corpus.www, folder: corpus.folder, rateLimit: "300k"))
        corpus.publish(["levels-a.zip", "levels-b.zip"], baseURL: nginx.base, serial: 1)
        let dest = corpus.destination("app")
        let script = corpus.folder.write("pty_run.py", Self.ptyScript)
        let captured = corpus.folder.url("terminal.out")
        let result = run(
            "python3",
            [
                script, captured, hcpackBinary(), "fetch", nginx.base + "/catalog.json", "--trusted-key", corpus.pub, "--dest", dest,
                "--product", "com.example.a", "--product", "com.example.b", "--jobs", "2",
            ])
        #expect(result.status == 0, "\(result.output)")
        // The terminal turns "\n" into "\r\n"; each redraw is "\r", the cursor back up, erase to the end, the lines.
        let text = String(decoding: corpus.folder.read("terminal.out") ?? [], as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n")
        let segments = text.components(separatedBy: "\u{1B}[J").dropFirst()
        let frames = segments.map { String($0.split(separator: "\r", omittingEmptySubsequences: false).first ?? "") }
        try #require(!frames.isEmpty, "nothing was drawn: \(text.debugDescription)")
        let size = #"\d+(\.\d)? (B|KiB|MiB)"#
        let rest = #" \#(size)/\#(size) \#(size)/s (\d+s|\d+m\d\ds|\d+h\d\dm|--) left"#
        let transfer = try Regex(#"levels-[ab]\.zip"# + rest)
        let total = try Regex("total" + rest)
        for frame in frames.dropLast() {
            let lines = frame.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(lines.count >= 2, "\(frame.debugDescription)")
            #expect(lines.dropLast().allSatisfy { $0.wholeMatch(of: transfer) != nil }, "\(frame.debugDescription)")
            #expect(lines.last?.wholeMatch(of: total) != nil, "\(frame.debugDescription)")
        }
        // Both transfers on screen at once, each on its own line, with a time left once the rate is known.
        #expect(frames.contains { frame in
            let lines = frame.split(separator: "\n")
            return lines.count == 3 && lines[0].hasPrefix("levels-a.zip ") && lines[1].hasPrefix("levels-b.zip ") && !lines[0].hasSuffix("-- left")
        }, "\(frames)")
        // The lines are gone before the summary: the last redraw draws nothing, and a redraw of N lines first goes N-1 up.
        #expect(frames.last == "")
        #expect(text.contains("\r\u{1B}[2A\u{1B}[J"))
    }
}
