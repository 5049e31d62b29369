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

    @Test("The example verifies, inspects and diffs packages, with hcpack's exit codes")
    func runs() throws {
        let example = try #require(Self.binary(), "hcpack-library-example is not built next to the tests")
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "old")
        writeValidPackage(in: folder, root: "new")
        folder.write("new/Contents/index.json", "{\"title\": \"Changed\"}\n")
        zipFolder(folder.url("new"), to: folder.url("new.zip"))
        let result = run(example, [folder.url("new.zip"), folder.url("old")])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("package: com.example.levels 1.0"))
        #expect(result.output.contains("valid"))
        #expect(result.output.contains("0 added, 0 removed, 1 changed, 3 unchanged; version same"))
        folder.remove("old/Contents/index.json")
        #expect(run(example, [folder.url("old")]).status == 1)
        #expect(run(example, [folder.url("absent")]).status == 3)
        #expect(run(example, []).status == 2)
    }
}
