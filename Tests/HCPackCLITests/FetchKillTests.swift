import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built binary killed with SIGKILL at random points of download and install, then run to the end.
@Suite struct FetchKillTests {
    @Test("SIGKILL anywhere: the rerun leaves DIR as a direct install, and no archive byte on disk is asked for again")
    func killed() throws {
        let corpus = FetchCorpus()
        corpus.build("levels-1.0.zip", version: "1.0", files: FetchCorpus.v1, big: 3 << 20)
        // limit_rate: a download lasts about half a second, so random kills land in it, in the install, or after.
        let nginx = try #require(Nginx(root: corpus.www, folder: corpus.folder, rateLimit: "6m"))
        corpus.publish(["levels-1.0.zip"], baseURL: nginx.base, serial: 1)
        let dest = corpus.destination("app")
        let size = corpus.size("levels-1.0.zip")
        let arguments = [
            "fetch", nginx.base + "/catalog.json", "--trusted-key", corpus.pub, "--dest", dest, "--product", "com.example.levels", "-q",
        ]

        var starts: Set<Int64> = [0]
        var kills = 0
        for _ in 0..<6 {
            let onDisk = corpus.partials(dest).values.first ?? 0
            starts.insert(onDisk)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: hcpackBinary())
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32.random(in: 50_000...900_000))
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                kills += 1
            }
            process.waitUntilExit()
            // Never a partial file past the catalog's size, whenever the kill came.
            #expect(corpus.partials(dest).values.allSatisfy { $0 <= size })
        }
        starts.insert(corpus.partials(dest).values.first ?? 0)
        let last = run(hcpackBinary(), arguments)
        #expect(last.status == 0, "\(last.output)")

        let direct = corpus.destination("direct")
        #expect(hcpack(["install", corpus.folder.url("www/levels-1.0.zip"), "--dest", direct, "-q"]).status == 0)
        #expect(corpus.snapshot(dest) == corpus.snapshot(direct))
        #expect(corpus.partials(dest).isEmpty)

        // nginx logs a cut request once it notices the closed connection: wait for the log to settle (bounded).
        var archive = nginx.requests().filter { $0.uri == "/levels-1.0.zip" }
        for _ in 0..<40 {
            usleep(100_000)
            let now = nginx.requests().filter { $0.uri == "/levels-1.0.zip" }
            if now.count == archive.count && now.map(\.bytes) == archive.map(\.bytes) { break }
            archive = now
        }
        // Every request asked for the bytes after those on disk at the start of a run: never for bytes it had.
        for request in archive {
            let start = request.range == "-" ? 0 : Int64(request.range.dropFirst(6).dropLast()) ?? -1
            #expect(starts.contains(start), "\(request) not in \(starts.sorted())")
        }
        // Each archive byte was sent once, plus what was in flight at each kill (at most the socket buffers).
        let served = archive.map(\.bytes).reduce(0, +)
        #expect(served >= size)
        #expect(served <= size + Int64(kills) * (2 << 20), "served \(served) for \(size) with \(kills) kills")
    }
}
