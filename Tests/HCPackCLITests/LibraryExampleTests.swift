import Foundation
import TestSupport
import Testing

@Suite("examples/LibraryUsage (public API only)")
struct LibraryExampleTests {
    static func binary() -> String? {
        var url = Bundle.main.bundleURL
        while url.path != "/" {
            let candidate = url.appendingPathComponent("hcpack-library-example").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            url.deleteLastPathComponent()
        }
        return nil
    }

    @Test("The example builds, verifies, inspects, diffs and installs packages, with hcpack's exit codes")
    func runs() throws {
        let example = try #require(Self.binary(), "hcpack-library-example is not built next to the tests")
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "old")
        writeValidPackage(in: folder, root: "new")
        folder.write("new/Contents/index.json", "{\"title\": \"Changed\"}\n")
        let built = run(example, ["build", folder.url("new"), folder.url("new.zip")])
        #expect(built.status == 0, "\(built.output)")
        #expect(built.output.contains("built \(folder.url("new.zip")): com.example.levels 1.0, 4 files"))
        let result = run(example, ["verify", folder.url("new.zip"), folder.url("old")])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("package: com.example.levels 1.0"))
        #expect(result.output.contains("valid"))
        #expect(result.output.contains("0 added, 0 removed, 1 changed, 3 unchanged; version same"))
        folder.makeFolder("dest")
        let installed = run(example, ["install", folder.url("new.zip"), folder.url("dest")])
        #expect(installed.status == 0, "\(installed.output)")
        #expect(installed.output.contains("installed com.example.levels 1.0: 4 files placed"))
        #expect(folder.read("dest/index.json") == folder.read("new/Contents/index.json"))
        folder.remove("old/Contents/index.json")
        #expect(run(example, ["verify", folder.url("old")]).status == 1)
        let refused = run(example, ["build", folder.url("old"), folder.url("old.zip")])
        #expect(refused.status == 1)
        #expect(refused.output.contains("files.not-found"))
        #expect(!FileManager.default.fileExists(atPath: folder.url("old.zip")))
        #expect(run(example, ["verify", folder.url("absent")]).status == 3)
        #expect(run(example, []).status == 2)
    }

    @Test("The example fetches from a signed catalog on nginx through Fetcher.events")
    func fetches() throws {
        let example = try #require(Self.binary(), "hcpack-library-example is not built next to the tests")
        let corpus = FetchCorpus()
        corpus.build("levels-1.0.zip", version: "1.0", files: FetchCorpus.v1)
        let nginx = try #require(Nginx(root: corpus.www, folder: corpus.folder))
        corpus.publish(["levels-1.0.zip"], baseURL: nginx.base, serial: 1)
        let dest = corpus.destination("app")
        let result = run(example, ["fetch", nginx.base + "/catalog.json", corpus.pub, dest, "com.example.levels"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("installed com.example.levels 1.0: \(corpus.size("levels-1.0.zip")) bytes downloaded"))
        #expect(corpus.folder.read("app/levels/1.json") == Array("{\"level\": 1}\n".utf8))
        let unknown = run(example, ["fetch", nginx.base + "/catalog.json", corpus.pub, dest, "com.example.nope"])
        #expect(unknown.status == 2, "\(unknown.output)")
    }
}
