import Foundation
import HCPackCLI
import HTTPTransport
import HostedContent
import TestSupport
import Testing

/// libcurl is not linked: fetch opens libcurl.so.4 with dlopen when it makes its first HTTP client, so every
/// other command starts without it (bench/README.md, "start-up: libcurl loaded only for fetch").
@Suite struct FetchLibraryTests {
    @Test("the built hcpack loads no libcurl for --version, and fetch loads libcurl.so.4 with dlopen")
    func libcurlLoadedOnlyByFetch() throws {
        let binary = hcpackBinary()
        let folder = TemporaryFolder()
        folder.makeFolder("app")
        // LD_DEBUG=files: glibc's loader names each library it loads and why, on standard error.
        let version = run("/usr/bin/env", ["LD_DEBUG=files", binary, "--version"])
        #expect(version.status == 0, "\(version.output)")
        try #require(version.output.contains("file=libarchive.so.13"), "LD_DEBUG printed no library: \(version.output)")
        #expect(!version.output.contains("libcurl"), "\(version.output)")

        let keys = hcpack(["keygen", "--name", "example.com/fetch-library", "-o", folder.url("release.key")])
        try #require(keys.status == 0, "\(keys.stderr)")
        // No catalog there: the fetch fails (exit 3) after making its client, which is what loads libcurl.
        let fetch = run(
            "/usr/bin/env",
            [
                "LD_DEBUG=files", binary, "fetch", folder.url("catalog.json"), "--trusted-key", folder.url("release.key.pub"),
                "--dest", folder.url("app"),
            ])
        #expect(fetch.status == 3, "\(fetch.output)")
        #expect(fetch.output.contains("file=libcurl.so.4 [0];  dynamically loaded by"), "\(fetch.output)")
    }

    @Test("a libcurl that cannot be loaded stops fetch as an environment error (exit 3) naming the library and libcurl4")
    func libcurlMissing() throws {
        let folder = TemporaryFolder()
        folder.makeFolder("app")
        var options = FetchOptions(catalog: folder.url("catalog.json"), trustedKeys: [], destination: folder.url("app"))
        // Package-only: the library a client opens. This name is loaded anew, not the process's libcurl.so.4.
        options.http.curlLibrary = "libhcpack-test-no-such-curl.so.4"
        do {
            _ = try Fetcher.fetch(options)
            Issue.record("fetch ran without libcurl")
        } catch {
            #expect(error.code == .io)
            #expect(HCPack.exitCode(for: error) == ExitCode.environment)
            #expect(
                error.message.contains("needs libcurl (libhcpack-test-no-such-curl.so.4), which could not be loaded"),
                "\(error.message)")
            #expect(error.message.contains("install the Debian package libcurl4"), "\(error.message)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url("app")).isEmpty)
        // The real library still loads afterwards: the failed name was not cached as the process's libcurl.
        #expect(throws: Never.self) { _ = try HTTPClient(limits: HTTPLimits()) }
    }

    @Test("a library that loads but is not libcurl is refused by the first function it lacks, naming libcurl4")
    func notLibcurl() throws {
        var limits = HTTPLimits()
        limits.curlLibrary = "libz.so.1"  // loaded already, by libarchive
        let error = try #require(throws: HTTPError.self) { _ = try HTTPClient(limits: limits) }
        #expect(error.message.contains("libz.so.1 has no curl_global_init"), "\(error.message)")
        #expect(error.message.contains("install the Debian package libcurl4"), "\(error.message)")
    }
}
