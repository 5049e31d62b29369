import Foundation
import TestSupport
import Testing

/// install copies a zip's large stored entries (64 KiB or more) into staging beside libarchive, in the kernel
/// (`copy_file_range`), on threads of their own: what lands in DEST, and what a failure leaves, must be what
/// the pipeline's writes give.
@Suite("install: large stored entries copied beside libarchive")
struct StoredInstallTests {
    static func random(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// A package folder: large random media (stored by `--compression store` and by auto alike) and small JSON.
    static func writePackage(_ folder: TemporaryFolder, _ name: String, version: String, media: [String: [UInt8]]) {
        var files = media
        for index in 0..<30 { files["data/level-\(index).json"] = Array("{\"level\": \(index), \"version\": \"\(version)\"}\n".utf8) }
        for (path, bytes) in files { folder.write("\(name)/Contents/\(path)", bytes) }
        folder.write(
            "\(name)/ContentInfo.plist",
            plistXML(
                """
                <key>IAPProductIdentifier</key><string>com.example.stored</string>
                <key>ContentVersion</key><string>\(version)</string>
                \(filesXML(files.keys.sorted()))
                """))
    }

    @Test("Installs and upgrades of stored zips (hcpack's, bsdtar's) give the sources byte for byte", arguments: ["hcpack", "bsdtar"])
    func installAndUpgrade(_ maker: String) throws {
        let folder = TemporaryFolder()
        var media: [String: [UInt8]] = [:]
        for index in 0..<6 { media["media/clip-\(index).bin"] = Self.random(100_000 + index * 70_000) }
        Self.writePackage(folder, "v1", version: "1.0", media: media)
        media["media/clip-1.bin"] = Self.random(150_000)  // changed
        media["media/clip-2.bin"] = nil  // gone
        media["media/new.bin"] = Self.random(90_000)  // added
        Self.writePackage(folder, "v2", version: "1.1", media: media)
        for version in ["v1", "v2"] {
            let made =
                maker == "hcpack"
                ? run(hcpackBinary(), ["build", folder.url(version), "-o", folder.url("\(version).zip"), "--compression", "store"])
                : run(
                    "env", ["LC_ALL=C.UTF-8", "bsdtar", "--format", "zip", "--options", "zip:compression=store", "-cf", folder.url("\(version).zip"), "."],
                    in: folder.url(version))
            try #require(made.status == 0, "\(made.output)")
        }
        folder.write("dest/mine.txt", "the user's file\n")
        for version in ["v1", "v2"] {
            let result = run(hcpackBinary(), ["install", folder.url("\(version).zip"), "--dest", folder.url("dest")])
            #expect(result.status == 0, "\(result.output)")
            let installed = regularFiles(folder.url("dest"))
            let expected = regularFiles(folder.url("\(version)/Contents"))
            #expect(installed.count == expected.count + 1)
            for (path, data) in expected { #expect(installed[path] == data, "\(version): \(path)") }
            #expect(installed["mine.txt"] == Data("the user's file\n".utf8))
        }
        let again = run(hcpackBinary(), ["install", folder.url("v2.zip"), "--dest", folder.url("dest")])
        #expect(again.status == 0, "\(again.output)")
        #expect(again.output.contains("already installed"), "\(again.output)")
    }

    /// 3 MB of large stored entries (files of 250 kB).
    static func bigStoredPackage(_ folder: TemporaryFolder) throws -> String {
        var media: [String: [UInt8]] = [:]
        for index in 0..<12 { media["media/clip-\(index).bin"] = Self.random(250_000) }  // 3 MB
        Self.writePackage(folder, "pkg", version: "1.0", media: media)
        let archive = folder.url("big.zip")
        let built = run(hcpackBinary(), ["build", folder.url("pkg"), "-o", archive, "--compression", "store"])
        try #require(built.status == 0, "\(built.output)")
        return archive
    }

    @Test("A file size limit hit while large stored entries are copied: exit 3 naming the file, DEST as it was")
    func diskFull() throws {
        let folder = TemporaryFolder()
        // Files of 250 kB: under `ulimit -f 200` the copy of the first one fails with EFBIG.
        try InstallRobustnessTests.expectRefusedWhenFull(Self.bigStoredPackage(folder), in: folder, fileLimitKiB: 200)
    }

    @Test(
        "A disk (2 MB tmpfs) that fills while large stored entries are copied: exit 3 naming the file, DEST as it was",
        .enabled(if: Requirement.mount.enabled, Requirement.mount.comment))
    func fileSystemFull() throws {
        try Requirement.mount.require()
        let folder = TemporaryFolder()
        try InstallRobustnessTests.expectRefusedOnFullFileSystem(Self.bigStoredPackage(folder), in: folder)
    }
}
