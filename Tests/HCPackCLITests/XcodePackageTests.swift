import Foundation
import TestSupport
import Testing

/// The regular files and folders under `root`, hcpack's own `.hcpack/` aside, sorted.
private func installedPaths(_ root: String) -> [String] {
    let all = (FileManager.default.enumerator(atPath: root)?.allObjects as? [String]) ?? []
    return all.filter { !$0.hasPrefix(".hcpack") }.sorted()
}

/// Packages as Xcode's In-App Purchase Content target makes them: ContentInfo.plist with ContentVersion and
/// IAPProductIdentifier only (sometimes an app key such as Folder), no Files, no HCPackIntegrity.
@Suite("Xcode-built packages (no Files key)")
struct XcodePackageTests {
    /// An Xcode-style archive of `files`, with the app's own keys.
    func xcodePackage(
        _ folder: TemporaryFolder, _ name: String, version: String, files: [(String, String)],
        appKeys: [String: String] = [:]
    ) -> String {
        var package = PackageArchive(version: version, files: files)
        package.filesKey = false
        package.integrity = false
        package.appKeys = appKeys
        return package.write(to: folder.url(name))
    }

    @Test("Verifies with exactly one warning, and --strict fails it", arguments: [[:], ["Folder": "Levels"]])
    func verifies(appKeys: [String: String]) throws {
        let folder = TemporaryFolder()
        let archive = xcodePackage(folder, "x.zip", version: "1.0", files: sampleFiles, appKeys: appKeys)
        let verified = hcpack(["verify", "--json", archive], in: folder.path)
        #expect(verified.status == 0)
        let report = try #require(jsonObject(verified.stdout))
        let problems = try #require(report["problems"] as? [[String: Any]])
        #expect(problems.map { $0["rule"] as? String } == ["plist.files-missing"])
        #expect(hcpack(["verify", "--strict", archive], in: folder.path).status == 1)
    }

    @Test("Installs every file under Contents/ with exit 0, the warning on stderr and the selection in --json")
    func installs() throws {
        let folder = TemporaryFolder()
        folder.makeFolder("dest")
        let archive = xcodePackage(folder, "x.zip", version: "1.0", files: sampleFiles, appKeys: ["Folder": "Levels"])
        let text = hcpack(["install", archive, "--dest", "dest"], in: folder.path)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stderr.contains("[plist.files-missing]"))
        for (path, content) in sampleFiles {
            #expect(folder.read("dest/" + path) == Array(content.utf8), "\(path)")
        }
        folder.makeFolder("dest2")
        let json = hcpack(["install", archive, "--dest", "dest2", "--json"], in: folder.path)
        #expect(json.status == 0)
        let result = try #require(jsonObject(json.stdout))
        #expect(result["selection"] as? String == "contents")
        #expect((result["installed"] as? [String])?.sorted() == sampleFiles.map(\.0).sorted())
        let problems = try #require(result["problems"] as? [[String: Any]])
        #expect(problems.map { $0["rule"] as? String } == ["plist.files-missing"])
    }

    @Test("Upgrades to a version with Files and back: receipts and stale-file removal work across selections")
    func upgradesAcrossSelections() throws {
        let folder = TemporaryFolder()
        folder.makeFolder("dest")
        let v1 = xcodePackage(folder, "v1.zip", version: "1.0", files: [("a.txt", "a1"), ("old.txt", "old"), ("d/b.txt", "b1")])
        #expect(hcpack(["install", v1, "--dest", "dest"], in: folder.path).status == 0)
        #expect(installedPaths(folder.url("dest")) == ["a.txt", "d", "d/b.txt", "old.txt"])

        // 1.1 lists its files (as hcpack build writes them): old.txt is gone from the package, so from DEST.
        let v2 = PackageArchive(version: "1.1", files: [("a.txt", "a2"), ("d/b.txt", "b1"), ("new.txt", "n")])
            .write(to: folder.url("v2.zip"))
        let upgraded = hcpack(["install", v2, "--dest", "dest", "--json"], in: folder.path)
        #expect(upgraded.status == 0, "\(upgraded.stderr)")
        let result = try #require(jsonObject(upgraded.stdout))
        #expect(result["selection"] as? String == "files")
        #expect(result["removed"] as? [String] == ["old.txt"])
        #expect(installedPaths(folder.url("dest")) == ["a.txt", "d", "d/b.txt", "new.txt"])
        #expect(folder.read("dest/a.txt") == Array("a2".utf8))

        // 1.2 is Xcode-built again and drops d/b.txt.
        let v3 = xcodePackage(folder, "v3.zip", version: "1.2", files: [("a.txt", "a3"), ("new.txt", "n")])
        let back = hcpack(["install", v3, "--dest", "dest", "--json"], in: folder.path)
        #expect(back.status == 0, "\(back.stderr)")
        let backResult = try #require(jsonObject(back.stdout))
        #expect(backResult["selection"] as? String == "contents")
        #expect(backResult["removed"] as? [String] == ["d/b.txt"])
        #expect(installedPaths(folder.url("dest")) == ["a.txt", "new.txt"])
        #expect(folder.read("dest/a.txt") == Array("a3".utf8))
        // The same version again: nothing to do, whichever selection it used.
        let again = hcpack(["install", v3, "--dest", "dest", "--json"], in: folder.path)
        #expect((try #require(jsonObject(again.stdout), "\(again.stderr)"))["status"] as? String == "unchanged")
    }

    @Test("build keeps the app's own keys, generates Files, and inspect shows the keys")
    func buildKeepsAppKeys() throws {
        let folder = TemporaryFolder()
        folder.write(
            "pkg/ContentInfo.plist",
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>
            <key>ContentVersion</key><string>1.0</string>
            <key>Folder</key><string>Levels</string>
            <key>IAPProductIdentifier</key><string>com.example.levels</string>
            </dict></plist>
            """)
        folder.write("pkg/Contents/a.txt", "a")
        let plain = hcpack(["verify", "pkg"], in: folder.path)
        #expect(plain.status == 0)
        #expect(plain.stdout.contains("plist.files-missing"))
        let built = hcpack(["build", "pkg", "-o", "out.zip"], in: folder.path)
        #expect(built.status == 0, "\(built.stderr)")
        let inspected = hcpack(["inspect", "--json", "out.zip"], in: folder.path)
        #expect(inspected.status == 0)
        let inspection = try #require(jsonObject(inspected.stdout))
        #expect((inspection["otherKeys"] as? [String: Any])?["Folder"] as? String == "Levels")
        #expect(inspection["filesListed"] as? Bool == true)
        #expect(hcpack(["verify", "--strict", "out.zip"], in: folder.path).status == 0)
    }
}
