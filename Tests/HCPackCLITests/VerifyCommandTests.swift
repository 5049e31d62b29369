import Foundation
import TestSupport
import Testing

@Suite("hcpack verify (command line)")
struct VerifyCommandTests {
    @Test("Valid folder and its zip exit 0 and say valid")
    func valid() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let result = hcpack(["verify", "pkg"], in: folder.path)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("valid: 0 errors, 0 warnings"))
        zipFolder(folder.url("pkg"), to: folder.url("pkg.zip"))
        #expect(hcpack(["verify", folder.url("pkg.zip")]).status == 0)
    }

    @Test("An invalid package exits 1 and names the rule and the file")
    func invalid() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        folder.remove("Contents/levels/2.json")
        let result = hcpack(["verify", folder.path])
        #expect(result.status == 1)
        #expect(result.stdout.contains("error: [files.not-found] Contents/levels/2.json:"))
        #expect(result.stdout.contains("INVALID: 1 error"))
    }

    @Test("Warnings pass, but fail with --strict")
    func strict() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        folder.write("Contents/extra.json", "{}")
        #expect(hcpack(["verify", folder.path]).status == 0)
        #expect(hcpack(["verify", "--strict", folder.path]).status == 1)
    }

    @Test("--json prints one object with the documented fields")
    func json() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        folder.remove("Contents/index.json")
        let result = hcpack(["verify", "--json", folder.path])
        #expect(result.status == 1)
        let object = try #require(jsonObject(result.stdout))
        #expect(object["valid"] as? Bool == false)
        #expect(object["errors"] as? Int == 1)
        let problems = try #require(object["problems"] as? [[String: Any]])
        #expect(problems.first?["rule"] as? String == "files.not-found")
        #expect(problems.first?["severity"] as? String == "error")
        #expect(problems.first?["path"] as? String == "Contents/index.json")
        let package = try #require(object["package"] as? [String: Any])
        #expect(package["productIdentifier"] as? String == "com.example.levels")
        #expect(package["contentVersion"] as? String == "1.0")
        #expect(package["files"] as? Int == 4)
    }

    @Test("A missing path exits 3")
    func missing() {
        let result = hcpack(["verify", "/nonexistent/hcpack"])
        #expect(result.status == 3)
        #expect(result.stderr.contains("/nonexistent/hcpack"))
    }

    @Test("Usage mistakes exit 2 with the usage line", arguments: [["verify"], ["verify", "--bogus", "x"], ["verify", "a", "b"], ["frobnicate"], ["verify", "--max-size", "lots", "x"], []])
    func usage(_ arguments: [String]) {
        let result = hcpack(arguments)
        #expect(result.status == 2)
        #expect(result.stderr.contains("Usage:"))
        #expect(result.stdout.isEmpty)
    }

    @Test("Help and version", arguments: [["--help"], ["help", "verify"], ["verify", "--help"], ["--version"]])
    func help(_ arguments: [String]) {
        let result = hcpack(arguments)
        #expect(result.status == 0)
        #expect(result.stdout.contains("hcpack"))
        #expect(result.stderr.isEmpty)
    }

    @Test("Command help lists every option of the command")
    func helpListsOptions() {
        let text = hcpack(["help", "verify"]).stdout
        for option in ["--strict", "--max-size BYTES", "--json", "-q, --quiet", "-h, --help"] {
            #expect(text.contains(option))
        }
        #expect(text.contains("Usage: hcpack verify [options] PATH"))
    }

    @Test("The built binary gives the same exit codes end to end")
    func endToEnd() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        let binary = hcpackBinary()
        #expect(run(binary, ["verify", folder.path]).status == 0)
        #expect(run(binary, ["verify", folder.url("missing")]).status == 3)
        #expect(run(binary, ["verify", "--nope"]).status == 2)
        folder.remove("ContentInfo.plist")
        #expect(run(binary, ["verify", folder.path]).status == 1)
    }
}

@Suite("Documentation")
struct DocumentationTests {
    @Test("docs/rules.md documents every rule ID")
    func rulesDocumented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/rules.md"), encoding: .utf8)
        let listing = hcpack(["rules", "--json"])
        let rules = try #require(jsonObject(listing.stdout)?["rules"] as? [[String: Any]])
        #expect(rules.count > 40)
        for rule in rules {
            let id = try #require(rule["rule"] as? String)
            #expect(text.contains("`\(id)`"), "docs/rules.md lacks \(id)")
        }
    }
}
