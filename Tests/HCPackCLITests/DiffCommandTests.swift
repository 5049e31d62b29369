import Foundation
import TestSupport
import Testing

@Suite("hcpack diff")
struct DiffCommandTests {
    /// OLD is the sample package at 1.0; NEW (2.0) changes index.json, drops levels/2.json, adds levels/3.json.
    static func makeReleases(_ folder: TemporaryFolder, newVersion: String = "2.0") {
        writeValidPackage(in: folder, root: "old")
        var files = sampleFiles.filter { $0.0 != "levels/2.json" }
        files[0].1 = "{\"title\": \"Levels, updated!\"}\n"
        files.append(("levels/3.json", "{\"level\": 3}\n"))
        writeValidPackage(in: folder, root: "new", files: files)
        let plist = String(decoding: folder.read("new/ContentInfo.plist") ?? [], as: UTF8.self)
        folder.write(
            "new/ContentInfo.plist",
            plist.replacingOccurrences(of: "<string>1.0</string>", with: "<string>\(newVersion)</string>"))
    }

    @Test("Text output lists added, removed and changed files, the size delta and the version change")
    func text() {
        let folder = TemporaryFolder()
        Self.makeReleases(folder)
        let result = hcpack(["diff", "old", "new"], in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        let text = result.stdout
        #expect(text.contains("version: 1.0 -> 2.0 (upgrade: NEW is greater)"))
        #expect(text.contains("added    levels/3.json (13 bytes)"))
        #expect(text.contains("removed  levels/2.json (13 bytes)"))
        #expect(text.contains("changed  index.json (20 -> 30 bytes)"))
        #expect(!text.contains("levels/1.json"), "unchanged files are only counted in text output")
        #expect(text.contains("summary: 1 added, 1 removed, 1 changed, 2 unchanged; size +10 bytes"))
    }

    @Test("JSON output: every list, digests, counts, version and size delta; archives compare like folders")
    func json() throws {
        let folder = TemporaryFolder()
        Self.makeReleases(folder)
        zipFolder(folder.url("old"), to: folder.url("old.zip"))
        let tar = run("tar", ["-czf", folder.url("new.tar.gz"), "-C", folder.url("new"), "."])
        #expect(tar.status == 0)
        let result = hcpack(["diff", "--json", folder.url("old.zip"), folder.url("new.tar.gz")])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(jsonObject(result.stdout))
        let counts = try #require(object["counts"] as? [String: Int])
        #expect(counts == ["added": 1, "removed": 1, "changed": 1, "unchanged": 2])
        #expect(object["sizeDelta"] as? Int == 10)
        #expect(object["sameProduct"] as? Bool == true)
        let version = try #require(object["version"] as? [String: Any])
        #expect(version["change"] as? String == "upgrade")
        #expect(version["newIsGreater"] as? Bool == true)
        #expect(version["old"] as? String == "1.0")
        let changed = try #require((object["changed"] as? [[String: Any]])?.first)
        #expect(changed["path"] as? String == "index.json")
        #expect(changed["oldSHA256"] as? String != changed["newSHA256"] as? String)
        #expect((changed["newSHA256"] as? String)?.count == 64)
        let unchanged = try #require(object["unchanged"] as? [[String: Any]])
        #expect(unchanged.map { $0["path"] as? String } == ["art/Café.txt", "levels/1.json"])
        let added = try #require(object["added"] as? [[String: Any]])
        #expect(added.map { $0["path"] as? String } == ["levels/3.json"])
        let old = try #require(object["old"] as? [String: Any])
        #expect(old["usesFilesList"] as? Bool == true)
        #expect(old["files"] as? Int == 4)
    }

    @Test("Identical packages: nothing added, removed or changed, same version")
    func identical() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "a")
        writeValidPackage(in: folder, root: "b")
        let object = try #require(jsonObject(hcpack(["diff", "--json", folder.url("a"), folder.url("b")]).stdout))
        #expect(object["counts"] as? [String: Int] == ["added": 0, "removed": 0, "changed": 0, "unchanged": 4])
        #expect((object["version"] as? [String: Any])?["change"] as? String == "same")
    }

    @Test("Different product identifiers are pointed out")
    func otherProduct() throws {
        let folder = TemporaryFolder()
        Self.makeReleases(folder)
        let plist = String(decoding: folder.read("new/ContentInfo.plist") ?? [], as: UTF8.self)
        folder.write("new/ContentInfo.plist", plist.replacingOccurrences(of: "com.example.levels", with: "com.example.other"))
        let text = hcpack(["diff", "old", "new"], in: folder.path)
        #expect(text.status == 0)
        #expect(text.stdout.contains("note: the product identifiers differ"))
        let object = try #require(jsonObject(hcpack(["diff", "--json", "old", "new"], in: folder.path).stdout))
        #expect(object["sameProduct"] as? Bool == false)
        #expect((object["new"] as? [String: Any])?["productIdentifier"] as? String == "com.example.other")
    }

    @Test("--fail-on-downgrade exits 1 for a lower version only; without it a downgrade still exits 0")
    func downgrade() {
        let folder = TemporaryFolder()
        Self.makeReleases(folder, newVersion: "0.9")
        let plain = hcpack(["diff", "old", "new"], in: folder.path)
        #expect(plain.status == 0)
        #expect(plain.stdout.contains("DOWNGRADE"))
        let failing = hcpack(["diff", "--fail-on-downgrade", "old", "new"], in: folder.path)
        #expect(failing.status == 1)
        #expect(failing.stderr.contains("ContentVersion 0.9 is lower than old's 1.0"))
        // Equal versions ("1.0" == "1") pass.
        let same = TemporaryFolder()
        Self.makeReleases(same, newVersion: "1")
        #expect(hcpack(["diff", "--fail-on-downgrade", "old", "new"], in: same.path).status == 0)
    }

    @Test("Without a Files list every regular file under Contents/ is compared (junk aside)")
    func withoutFilesList() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "old")
        for root in ["a", "b"] {
            folder.write("\(root)/Contents/x.txt", root == "a" ? "one" : "two")
            folder.write("\(root)/Contents/.DS_Store", root)
            folder.write(
                "\(root)/ContentInfo.plist",
                plistXML("<key>IAPProductIdentifier</key><string>p</string><key>ContentVersion</key><string>1</string>"))
        }
        let object = try #require(jsonObject(hcpack(["diff", "--json", folder.url("a"), folder.url("b")]).stdout))
        #expect(object["counts"] as? [String: Int] == ["added": 0, "removed": 0, "changed": 1, "unchanged": 0])
        #expect((object["old"] as? [String: Any])?["usesFilesList"] as? Bool == false)
    }

    @Test("A missing input exits 3, a folder without ContentInfo.plist exits 1, each naming the path")
    func failures() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "good")
        folder.write("bare/Contents/a.txt", "a")
        let missing = hcpack(["diff", folder.url("good"), folder.url("absent")])
        #expect(missing.status == 3)
        #expect(missing.stderr.contains("absent"))
        let bare = hcpack(["diff", folder.url("bare"), folder.url("good")])
        #expect(bare.status == 1)
        #expect(bare.stderr.contains("bare: no readable ContentInfo.plist"))
        folder.write("junk.zip", "this is not an archive")
        let junk = hcpack(["diff", folder.url("good"), folder.url("junk.zip")])
        #expect(junk.status == 1)
        #expect(junk.stderr.contains("junk.zip"))
        // A truncated archive: absence of files proves nothing, so it is not compared.
        zipFolder(folder.url("good"), to: folder.url("good.zip"))
        let bytes = folder.read("good.zip") ?? []
        folder.write("cut.zip", Array(bytes.prefix(bytes.count / 2)))
        let cut = hcpack(["diff", folder.url("good.zip"), folder.url("cut.zip")])
        #expect(cut.status == 1, "\(cut.stdout)")
        #expect(cut.stderr.contains("cut.zip"))
        #expect(hcpack(["diff", "only-one"]).status == 2)
    }
}
