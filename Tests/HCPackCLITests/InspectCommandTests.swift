import Foundation
import TestSupport
import Testing

@Suite("hcpack inspect")
struct InspectCommandTests {
    static func digest(_ text: String) -> String {
        let folder = TemporaryFolder()
        folder.write("f", text)
        return String(run("sha256sum", [folder.url("f")]).output.prefix(64))
    }

    @Test("Text output of a folder: identity, other keys, every file with size and SHA-256, totals, root")
    func folderText() {
        let folder = TemporaryFolder()
        writeValidPackage(
            in: folder, root: "pkg",
            extraKeys:
                "<key>Title</key><string>Levels pack</string><key>Tags</key><array><string>puzzle</string></array><key>Count</key><integer>3</integer>"
        )
        let result = hcpack(["inspect", "pkg"], in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        let text = result.stdout
        #expect(text.contains("Product:      com.example.levels"))
        #expect(text.contains("Version:      1.0"))
        #expect(text.contains("Package root: the folder itself"))
        #expect(text.contains("Title: Levels pack"))
        #expect(text.contains("Tags:\n      - puzzle"))
        #expect(text.contains("Count: 3"))
        #expect(!text.contains("IAPProductIdentifier:"), "identity keys are not repeated under other keys")
        let levelOne = Self.digest("{\"level\": 1}\n")
        #expect(text.contains("   13  \(levelOne)  levels/1.json\n"), "\(text)")
        let total = sampleFiles.reduce(0) { $0 + $1.1.utf8.count }
        #expect(text.contains("Totals: 4 files, \(total) content bytes"))
        #expect(!text.contains("archive bytes"), "a folder has no archive size")
    }

    @Test("JSON output of a zip with a top-level folder: root, ratio, plist values as JSON")
    func archiveJSON() throws {
        let folder = TemporaryFolder()
        writeValidPackage(
            in: folder, root: "stage/Levels",
            extraKeys: """
                <key>Nested</key><dict><key>Flag</key><true/><key>Ratio</key><real>0.5</real></dict>
                <key>Blob</key><data>3q2+7w==</data><key>When</key><date>2024-01-02T03:04:05Z</date>
                """)
        folder.write("stage/Levels/Contents/unlisted.txt", "extra\n")
        zipFolder(folder.url("stage"), to: folder.url("levels.zip"))
        let result = hcpack(["inspect", "--json", folder.url("levels.zip")])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(jsonObject(result.stdout))
        #expect(object["productIdentifier"] as? String == "com.example.levels")
        #expect(object["contentVersion"] as? String == "1.0")
        let root = try #require(object["root"] as? [String: Any])
        #expect(root["kind"] as? String == "top-level-folder")
        #expect(root["name"] as? String == "Levels")
        let source = try #require(object["source"] as? [String: Any])
        #expect(source["kind"] as? String == "archive")
        let others = try #require(object["otherKeys"] as? [String: Any])
        let nested = try #require(others["Nested"] as? [String: Any])
        #expect(nested["Flag"] as? Bool == true)
        #expect(nested["Ratio"] as? Double == 0.5)
        #expect(others["Blob"] as? String == "3q2+7w==")
        #expect(others["When"] as? String == "2024-01-02T03:04:05Z")
        #expect(others["Files"] == nil && others["IAPProductIdentifier"] == nil)
        let files = try #require(object["files"] as? [[String: Any]])
        #expect(
            files.map { $0["path"] as? String } == [
                "art/Café.txt", "index.json", "levels/1.json", "levels/2.json", "unlisted.txt",
            ])
        let unlisted = try #require(files.last)
        #expect(unlisted["listed"] as? Bool == false)
        #expect(unlisted["size"] as? Int == 6)
        #expect(unlisted["sha256"] as? String == Self.digest("extra\n"))
        #expect(files.first?["listed"] as? Bool == true)
        let verification = try #require(object["verification"] as? [String: Any])
        #expect(verification["warnings"] as? Int == 1)
        let totals = try #require(object["totals"] as? [String: Any])
        let archiveBytes = try #require(totals["archiveBytes"] as? Int)
        let attributes = try FileManager.default.attributesOfItem(atPath: folder.url("levels.zip"))
        #expect(archiveBytes == (attributes[.size] as? Int))
        let packageBytes = try #require(totals["packageBytes"] as? Int)
        let ratio = try #require(totals["compressionRatio"] as? Double)
        #expect(abs(ratio - Double(archiveBytes) / Double(packageBytes)) < 1e-9)
        #expect(totals["files"] as? Int == 5)
    }

    @Test("An archive whose root is the package says so")
    func archiveRoot() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        zipFolder(folder.url("pkg"), to: folder.url("pkg.zip"))
        let result = hcpack(["inspect", folder.url("pkg.zip")])
        #expect(result.status == 0)
        #expect(result.stdout.contains("Package root: the archive root"))
        #expect(result.stdout.contains("compression ratio"))
    }

    @Test("No ContentInfo.plist exits 1 and says what to run; a missing path exits 3")
    func failures() {
        let folder = TemporaryFolder()
        folder.write("Contents/a.txt", "a")
        let result = hcpack(["inspect", folder.path])
        #expect(result.status == 1)
        #expect(result.stderr.contains("no readable ContentInfo.plist"))
        #expect(result.stderr.contains("hcpack verify"))
        let missing = hcpack(["inspect", folder.url("nope.zip")])
        #expect(missing.status == 3)
        #expect(missing.stderr.contains("nope.zip"))
        #expect(hcpack(["inspect"]).status == 2)
    }
}
