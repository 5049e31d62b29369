import ArchiveIO
import Digest
import FileSystemIO
import Foundation
@testable import HostedContent
import TestSupport
import Testing

/// A zip's large stored entries are read and hashed beside libarchive, straight from the file
/// (`StoredDataHashing`): what a scan finds must be what libarchive's own reading finds (the in-memory scan,
/// which never reads beside it), for archives made by hcpack and by other tools.
@Suite("scan: stored entries read beside libarchive")
struct StoredDataTests {
    static let large = Int(StoredDataHashing.Span.minimumBytes)

    /// Large files (one exactly at the threshold, one just under it, and when asked an ELF executable, which
    /// hcpack would not build) among small ones.
    static func writePackage(in folder: TemporaryFolder, executable: Bool = false) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for index in 0..<6 { files["media/clip-\(index).bin"] = AssembledZipTests.randomBytes(large * (index + 1) + index) }
        files["media/at-threshold.bin"] = AssembledZipTests.randomBytes(large)
        files["media/under-threshold.bin"] = AssembledZipTests.randomBytes(large - 1)
        if executable { files["tools/helper"] = [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0] + AssembledZipTests.randomBytes(large * 2) }
        for index in 0..<40 { files["data/level-\(index).json"] = AssembledZipTests.json(500 + index * 50, seed: index) }
        for (path, bytes) in files { folder.write("pkg/Contents/" + path, bytes) }
        let list = files.keys.sorted().map { "<string>\($0)</string>" }.joined()
        folder.write(
            "pkg/ContentInfo.plist",
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>IAPProductIdentifier</key><string>com.example.stored</string>
            <key>ContentVersion</key><string>1.0</string><key>Files</key><array>\(list)</array></dict></plist>
            """)
        return files
    }

    /// `writePackage`, built with `--compression store` into p.zip.
    static func storedBuild() throws -> (folder: TemporaryFolder, files: [String: [UInt8]], zip: String) {
        let folder = TemporaryFolder()
        let files = writePackage(in: folder)
        let zip = folder.url("p.zip")
        _ = try Builder.build(BuildOptions(source: folder.url("pkg"), output: zip, compression: .store))
        return (folder, files, zip)
    }

    /// The same archive scanned from its file and from memory: the same entries, digests and problems.
    static func expectSameScan(_ zip: String, limits: ReadLimits = ReadLimits()) throws -> PackageSnapshot {
        let beside = try PackageScanner.readArchive(zip, limits: limits, staging: nil, waitsForZipRecords: true)
        let bytes = try #require(FileManager.default.contents(atPath: zip).map { [UInt8]($0) })
        let inMemory = try PackageScanner.scanArchive(bytes: bytes, name: zip, limits: limits)
        #expect(inMemory.entriesReadBeside == 0)
        #expect(beside.entries == inMemory.entries)
        #expect(beside.scanProblems.problems.map(\.rule) == inMemory.scanProblems.problems.map(\.rule))
        #expect(beside.scanProblems.problems.map(\.message) == inMemory.scanProblems.problems.map(\.message))
        #expect(beside.isComplete == inMemory.isComplete)
        // Without waiting for the records (the default), whichever entries the threads get.
        let unwaited = try PackageScanner.scanArchive(zip, limits: limits)
        #expect(unwaited.entries == inMemory.entries)
        #expect(unwaited.scanProblems.problems.map(\.message) == inMemory.scanProblems.problems.map(\.message))
        return beside
    }

    @Test("Stored builds: every large entry is read beside libarchive, with the sources' digests")
    func hcpackStored() throws {
        let (folder, files, zip) = try Self.storedBuild()
        defer { withExtendedLifetime(folder) {} }  // its deinit removes the files
        let snapshot = try Self.expectSameScan(zip)
        // Six clips and the one at the threshold; not the one under it, nor the plist.
        #expect(snapshot.entriesReadBeside == 7)
        for (path, bytes) in files {
            let entry = try #require(snapshot.entries.first { $0.path == "Contents/" + path })
            #expect(entry.sha256 == Digest.Hasher.digest(.sha256, of: bytes), "\(path)")
            #expect(entry.size == Int64(bytes.count))
        }
        let report = try Verifier.verify(zip)
        #expect(report.problems.problems.isEmpty, "\(report.problems.problems)")
    }

    @Test("Other tools' stored zips (data descriptors from bsdtar, none from Python) read the same", arguments: ["bsdtar", "python"])
    func otherTools(_ tool: String) throws {
        let folder = TemporaryFolder()
        let files = Self.writePackage(in: folder, executable: true)
        let zip = folder.url("p.zip")
        let python = """
            import os, sys, zipfile
            with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_STORED) as archive:
                for folder, _, names in sorted(os.walk(sys.argv[2])):
                    for name in sorted(names):
                        path = os.path.join(folder, name)
                        archive.write(path, os.path.relpath(path, sys.argv[2]))
            """
        let made =
            tool == "bsdtar"
            ? run("env", ["LC_ALL=C.UTF-8", "bsdtar", "--format", "zip", "--options", "zip:compression=store", "-cf", zip, "."], in: folder.url("pkg"))
            : run("python3", ["-c", python, zip, folder.url("pkg")])
        try #require(made.status == 0, "\(made.output)")
        // The shape this test is about: every file stored, with data descriptors from bsdtar and none from zipfile.
        let shapes = zipEntryShapes(zip).filter { !$0.key.hasSuffix("/") }
        try #require(shapes.count >= 8, "\(shapes)")
        #expect(shapes.values.allSatisfy { $0.method == 0 }, "\(shapes)")
        #expect(shapes.values.allSatisfy { $0.dataDescriptor == (tool == "bsdtar") }, "\(shapes)")
        let snapshot = try Self.expectSameScan(zip)
        // Six clips, the one at the threshold and the helper.
        #expect(snapshot.entriesReadBeside == 8)
        let helper = try #require(snapshot.entries.first { $0.path.hasSuffix("Contents/tools/helper") })
        #expect(helper.executable != nil)
        #expect(helper.sha256 == Digest.Hasher.digest(.sha256, of: try #require(files["tools/helper"])))
        let report = try Verifier.verify(zip)
        #expect(report.problems.problems.map(\.rule).contains(.executable), "\(report.problems.problems)")
    }

    @Test("A damaged byte in a large stored entry is found, named, as libarchive's reading finds it")
    func damagedStoredEntry() throws {
        let (folder, files, zip) = try Self.storedBuild()
        var bytes = try #require(folder.read("p.zip"))
        // The clip's bytes are random: find them in the archive and change one in the middle.
        let clip = try #require(files["media/clip-2.bin"])
        let start = try #require(Self.offset(of: Array(clip.prefix(64)), in: bytes))
        bytes[start + clip.count / 2] ^= 0x5A
        folder.write("p.zip", bytes)
        let snapshot = try Self.expectSameScan(zip)
        #expect(snapshot.entriesReadBeside == 7)
        let report = try Verifier.verify(zip)
        let found = report.problems.problems.map { "\($0.rule.rawValue) \($0.path)" }
        #expect(found.contains("archive.corrupt Contents/media/clip-2.bin"), "\(found)")
        #expect(found.contains("integrity.digest-mismatch Contents/media/clip-2.bin"), "\(found)")
    }

    @Test("Staging: large stored entries are copied beside libarchive, and the staged files hold the sources' bytes")
    func staging() throws {
        let (folder, files, zip) = try Self.storedBuild()
        folder.makeFolder("stage")
        let area = try StagingArea(in: DirectoryHandle.open(folder.url("stage")))
        let snapshot = try PackageScanner.readArchive(zip, limits: ReadLimits(), staging: area, waitsForZipRecords: true)
        #expect(snapshot.entriesReadBeside == 7)
        #expect(snapshot.scanProblems.problems.isEmpty, "\(snapshot.scanProblems.problems)")
        #expect(area.writtenFiles == files.count)
        for (path, bytes) in files {
            #expect(folder.read("stage/\(area.name)/Contents/\(path)") == bytes, "\(path)")
            let entry = try #require(snapshot.entries.first { $0.path == "Contents/" + path })
            #expect(entry.sha256 == Digest.Hasher.digest(.sha256, of: bytes), "\(path)")
        }
        try area.remove()
    }

    @Test("A wrong CRC-32 in a large stored entry's central record is found when staging too (install), as verify finds it")
    func wrongRecordedChecksumWhileStaging() throws {
        let (folder, _, zip) = try Self.storedBuild()
        var bytes = try #require(folder.read("p.zip"))
        // The central record names the entry last; its CRC-32 sits 16 bytes into the record, 46 before the name.
        let name = Array("Contents/media/clip-3.bin".utf8)
        var nameAt: Int?
        for start in 0...(bytes.count - name.count) where bytes[start..<(start + name.count)].elementsEqual(name) { nameAt = start }
        let record = try #require(nameAt) - 46
        try #require(bytes[record..<(record + 4)].elementsEqual([0x50, 0x4B, 0x01, 0x02]))
        bytes[record + 16] ^= 0xFF
        folder.write("p.zip", bytes)
        folder.makeFolder("stage")
        let area = try StagingArea(in: DirectoryHandle.open(folder.url("stage")))
        let staged = try PackageScanner.readArchive(zip, limits: ReadLimits(), staging: area, waitsForZipRecords: true)
        try area.remove()
        #expect(staged.entriesReadBeside == 7)
        let found = staged.scanProblems.problems.map { "\($0.rule.rawValue) \($0.path)" }
        #expect(found.contains("archive.corrupt Contents/media/clip-3.bin"), "\(found)")
        let scanned = try Self.expectSameScan(zip)
        #expect(staged.scanProblems.problems.map(\.message) == scanned.scanProblems.problems.map(\.message))
    }

    @Test("Large stored entries whose data overlap (a header hidden in another's data) are all left to libarchive")
    func overlapping() throws {
        let folder = TemporaryFolder()
        var zip = RawZip.package([])
        var hidden = RawZipEntry("Contents/inner.bin", AssembledZipTests.randomBytes(Self.large + 10))
        zip.entries.append(RawZipEntry("Contents/outer.bin", hidden.localRecord() + AssembledZipTests.randomBytes(Self.large)))
        hidden.pointsIntoDataOf = 2
        zip.entries.append(hidden)
        let path = zip.write(to: folder.url("overlap.zip"))
        let snapshot = try Self.expectSameScan(path)
        #expect(snapshot.entriesReadBeside == 0)
        let report = try Verifier.verify(path)
        #expect(!report.problems.problems.isEmpty)
    }

    @Test("Limits count stored entries read beside libarchive as if read")
    func limits() throws {
        let (folder, _, zip) = try Self.storedBuild()
        defer { withExtendedLifetime(folder) {} }  // its deinit removes the files
        for archive in [ArchiveLimits(maxEntryBytes: Int64(Self.large * 3)), ArchiveLimits(maxTotalBytes: Int64(Self.large * 10))] {
            let snapshot = try Self.expectSameScan(zip, limits: ReadLimits(archive: archive))
            #expect(snapshot.scanProblems.problems.map(\.rule).contains(.limitExceeded), "\(snapshot.scanProblems.problems)")
            #expect(!snapshot.isComplete)
        }
    }

    static func offset(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return start }
        }
        return nil
    }
}
