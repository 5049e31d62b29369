import Foundation
import HostedContent
import TestSupport
import Testing

/// The repository's Templates/ folder.
let repositoryTemplates = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
    .appendingPathComponent("Templates").path

/// A copy of the repository template with a marker comment, so a test can tell which template was used.
func markedTemplate(in folder: TemporaryFolder, at relative: String, marker: String) throws {
    let text = try String(contentsOfFile: repositoryTemplates + "/ContentInfo.plist", encoding: .utf8)
    folder.write(
        relative + "/ContentInfo.plist",
        text.replacingOccurrences(of: "<plist version=\"1.0\">", with: "<!-- \(marker) -->\n<plist version=\"1.0\">"))
}

@Suite("hcpack init (command line)")
struct InitCommandTests {
    @Test("The scaffold verifies, builds once content is added, and carries the template's comments")
    func scaffold() throws {
        let folder = TemporaryFolder()
        let result = hcpack(["init", "pkg", "--product-id", "com.example.new"], in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("hcpack build"))
        let verified = hcpack(["verify", "pkg"], in: folder.path)
        #expect(verified.status == 0, "\(verified.stdout)")
        #expect(verified.stdout.contains("(com.example.new 1.0): valid: 0 errors"))
        let plist = String(decoding: folder.read("pkg/ContentInfo.plist") ?? [], as: UTF8.self)
        #expect(plist.contains("<!--") && plist.contains("IAPProductIdentifier:"))
        #expect(!plist.contains("{{"))
        #expect(listing(folder.url("pkg/Contents")).isEmpty)
        folder.write("pkg/Contents/levels/1.json", "{\"level\": 1}")
        #expect(hcpack(["build", "pkg"], in: folder.path).status == 0)
        #expect(hcpack(["verify", "--strict", "com.example.new-1.0.zip"], in: folder.path).status == 0)
    }

    @Test(
        "Bad identifiers and versions exit 2 with a clear message and create nothing",
        arguments: [
            ["--product-id", "bad id"], ["--product-id", ""], ["--product-id", "com/example"],
            ["--product-id", "ok", "--content-version", "v1"],
            ["--product-id", "ok", "--content-version", "1..2"], [],
        ])
    func badIdentity(_ options: [String]) {
        let folder = TemporaryFolder()
        let result = hcpack(["init", "pkg"] + options, in: folder.path)
        #expect(result.status == 2)
        #expect(
            result.stderr.contains("product identifier") || result.stderr.contains("content version")
                || result.stderr.contains("--product-id"))
        #expect(listing(folder.path).isEmpty)
    }

    @Test("A non-empty folder is refused unless --force, and an existing plist always is")
    func existingFolder() {
        let folder = TemporaryFolder()
        folder.write("pkg/notes.txt", "mine")
        let refused = hcpack(["init", "pkg", "--product-id", "p"], in: folder.path)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("not empty; use --force"))
        #expect(hcpack(["init", "pkg", "--product-id", "p", "--force"], in: folder.path).status == 0)
        #expect(folder.read("pkg/notes.txt") == Array("mine".utf8))
        let again = hcpack(["init", "pkg", "--product-id", "q", "--force"], in: folder.path)
        #expect(again.status == 2)
        #expect(String(decoding: folder.read("pkg/ContentInfo.plist") ?? [], as: UTF8.self).contains("<string>p</string>"))
        folder.makeFolder("empty")
        #expect(hcpack(["init", "empty", "--product-id", "p"], in: folder.path).status == 0, "an empty folder is fine")
    }

    @Test("HCPACK_TEMPLATES and --templates choose the template")
    func templateFromEnvironment() throws {
        let folder = TemporaryFolder()
        try markedTemplate(in: folder, at: "custom", marker: "from the environment")
        try markedTemplate(in: folder, at: "option", marker: "from the option")
        let environment = ["HCPACK_TEMPLATES": folder.url("custom")]
        #expect(hcpack(["init", "a", "--product-id", "p"], in: folder.path, environment: environment).status == 0)
        #expect(String(decoding: folder.read("a/ContentInfo.plist") ?? [], as: UTF8.self).contains("from the environment"))
        #expect(
            hcpack(["init", "b", "--product-id", "p", "--templates", "option"], in: folder.path, environment: environment).status
                == 0)
        #expect(String(decoding: folder.read("b/ContentInfo.plist") ?? [], as: UTF8.self).contains("from the option"))
        let missing = hcpack(
            ["init", "c", "--product-id", "p"], in: folder.path, environment: ["HCPACK_TEMPLATES": folder.url("nowhere")])
        #expect(missing.status == 3)
        #expect(missing.stderr.contains("HCPACK_TEMPLATES"))
    }

    @Test("An installed binary finds <prefix>/share/hcpack/Templates beside its bin folder")
    func installedLayout() throws {
        let folder = TemporaryFolder()
        folder.makeFolder("prefix/bin")
        try FileManager.default.copyItem(atPath: hcpackBinary(), toPath: folder.url("prefix/bin/hcpack"))
        try markedTemplate(in: folder, at: "prefix/share/hcpack/Templates", marker: "installed copy")
        // Without HCPACK_TEMPLATES, which would take precedence.
        let result = run(
            "env",
            ["-u", "HCPACK_TEMPLATES", folder.url("prefix/bin/hcpack"), "init", "pkg", "--product-id", "com.example.installed"],
            in: folder.path)
        #expect(result.status == 0, "\(result.output)")
        #expect(String(decoding: folder.read("pkg/ContentInfo.plist") ?? [], as: UTF8.self).contains("installed copy"))
        #expect(run(folder.url("prefix/bin/hcpack"), ["verify", "pkg"], in: folder.path).status == 0)
    }
}
