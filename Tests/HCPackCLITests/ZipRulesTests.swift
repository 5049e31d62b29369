import Foundation
import TestSupport
import Testing

/// A zip that the readers apps use would unpack differently from hcpack, and the rule that refuses it.
struct ZipRuleCase: CustomStringConvertible, Sendable {
    let name: String
    let rule: String
    /// Writes the archive at the given path.
    let make: @Sendable (String) -> Void

    var description: String { name }

    /// A case written by the byte-level writer.
    init(_ name: String, _ rule: String, _ zip: RawZip) {
        self.name = name
        self.rule = rule
        self.make = { zip.write(to: $0) }
    }

    /// A case written by Python (`out` is the path; `base(z)` adds a valid package to a ZipFile).
    init(_ name: String, _ rule: String, python script: String) {
        self.name = name
        self.rule = rule
        self.make = { path in
            let program = """
                import zipfile, struct, sys
                out = sys.argv[1]
                plist = b'<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict><key>IAPProductIdentifier</key><string>com.example.zip</string><key>ContentVersion</key><string>1.0</string><key>Files</key><array><string>a.json</string></array></dict></plist>'
                def base(z):
                    z.writestr('ContentInfo.plist', plist)
                    z.writestr('Contents/a.json', b'{}')
                \(script)
                """
            let made = run("python3", ["-c", program, path])
            #expect(made.status == 0, "fixture script failed: \(made.output)")
        }
    }
}

/// Every zip rule, with a zip made for it (the list: #18 item 4 and #19).
let zipRuleCases: [ZipRuleCase] = {
    var overlap = RawZip.package([])
    let hidden = RawZipEntry("Contents/c.json", "{\"hidden\": 1}")
    overlap.entries.append(RawZipEntry("Contents/b.json", hidden.localRecord()))
    var pointing = hidden
    pointing.pointsIntoDataOf = 2
    overlap.entries.append(pointing)

    var shared = RawZip.package([RawZipEntry("Contents/b.json", "{}")])
    shared.entries[2].sharesLocalOf = 1
    shared.entries[2].localName = Array("Contents/a.json".utf8)  // the record it shares names a.json

    func entry(_ name: String, _ change: (inout RawZipEntry) -> Void) -> RawZipEntry {
        var entry = RawZipEntry(name, "{\"x\": 1}")
        change(&entry)
        return entry
    }
    let sixtyFourUnneeded = RawZip.package([
        entry("Contents/b.json") {
            $0.centralUncompressedSize = 0xffff_ffff
            $0.centralExtra = RawZip.extraField(0x0001, le64(8))
        }
    ])
    // Issue 27: zip64 records that readers read alike (a field or end record where none is needed) are approved
    // (ZipApprovedShapesTests); these are the ones they read differently.
    let sixtyFourLonger = RawZip.package([
        entry("Contents/b.json") {
            $0.centralUncompressedSize = 0xffff_ffff
            $0.centralExtra = RawZip.extraField(0x0001, le64(8) + le64(8))
        }
    ])
    let localSixtyFourDiffers = RawZip.package([
        entry("Contents/b.json") { $0.localExtra = RawZip.extraField(0x0001, le64(999) + le64(999)) }
    ])
    var endDiffersUnsaturated = RawZip.package([])
    endDiffersUnsaturated.zip64End = true
    endDiffersUnsaturated.zip64EntryCountDelta = 1
    var endInconsistent = RawZip.package([])
    endInconsistent.zip64End = true
    endInconsistent.saturateEnd = true
    endInconsistent.zip64EntryCountDelta = 1

    // Redteam5 findings 1 and 6: a data descriptor that disagrees with the central record, and a complete local
    // entry in bytes no central record covers (streaming readers unpack it).
    func described(_ change: (inout RawZipEntry) -> Void) -> RawZipEntry {
        entry("Contents/b.json") {
            $0.flags = 8
            $0.localCRC32 = 0
            $0.afterData = RawZip.descriptor(crc32: RawZip.crc32($0.data), compressed: UInt64($0.data.count), uncompressed: UInt64($0.data.count))
            change(&$0)
        }
    }
    let evil = RawZipEntry("Contents/a.json", "{\"evil\": 1}").localRecord()
    var hiddenBetween = RawZip.package([entry("Contents/b.json") { _ in }], listing: ["a.json", "b.json"])
    hiddenBetween.entries[1].afterData = evil
    var hiddenAfterLast = RawZip.package([entry("Contents/b.json") { $0.afterData = evil }], listing: ["a.json", "b.json"])
    hiddenAfterLast.entries[0].afterData = []
    var hiddenInJunk = RawZip.package([], listing: ["a.json"])
    hiddenInJunk.entries[0].afterData = Array(repeating: 0, count: 70_000) + evil + [0, 0]

    return [
        ZipRuleCase(
            "a data descriptor whose CRC-32 differs from the central record (Go: checksum error)", "zip.header-mismatch",
            .package([described { $0.afterData = RawZip.descriptor(crc32: 1234, compressed: 8, uncompressed: 8) }])),
        ZipRuleCase(
            "a data descriptor without signature whose sizes differ from the central record", "zip.header-mismatch",
            .package([described { $0.afterData = RawZip.descriptor(crc32: RawZip.crc32($0.data), compressed: 8, uncompressed: 9, signed: false) }])),
        ZipRuleCase(
            "bit 3 in the central record, no data descriptor after the data", "zip.header-mismatch",
            .package([described { $0.afterData = [] }])),
        ZipRuleCase("a local entry hidden between two entries", "zip.overlapping-entries", hiddenBetween),
        ZipRuleCase("a local entry hidden after the last entry", "zip.overlapping-entries", hiddenAfterLast),
        ZipRuleCase("a local entry hidden past 64 KiB of padding", "zip.overlapping-entries", hiddenInJunk),
        ZipRuleCase(
            "a local entry before the first, offsets moved (zipfile appending to a file)", "zip.overlapping-entries",
            python: """
                import zlib
                data = b'{"evil": 1}'; n = b'Contents/a.json'
                open(out, 'wb').write(struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0, 0x21, zlib.crc32(data), len(data), len(data), len(n), 0) + n + data)
                z = zipfile.ZipFile(out, 'a'); base(z); z.close()
                """),
        ZipRuleCase(
            "central and local names differ (Master Key)", "zip.header-mismatch",
            .package([entry("Contents/../xt") { $0.localName = Array("Contents/b.json".utf8) }])),
        ZipRuleCase(
            "central and local methods differ", "zip.header-mismatch", .package([entry("Contents/b.json") { $0.localMethod = 8 }])
        ),
        ZipRuleCase(
            "central and local sizes differ", "zip.header-mismatch",
            .package([entry("Contents/b.json") { $0.localUncompressedSize = 3 }])),
        ZipRuleCase(
            "central and local CRC-32 differ", "zip.header-mismatch", .package([entry("Contents/b.json") { $0.localCRC32 = 7 }])),
        ZipRuleCase(
            "encryption flag only in the local header", "zip.header-mismatch",
            .package([entry("Contents/b.json") { $0.localFlags = 1 }])),
        ZipRuleCase("an entry hidden in another's data", "zip.overlapping-entries", overlap),
        ZipRuleCase("two records sharing one local header", "zip.overlapping-entries", shared),
        ZipRuleCase(
            "the central directory names a path twice", "zip.duplicate-name",
            .package([RawZipEntry("Contents/a.json", "{\"second\": true}")])),
        ZipRuleCase("a backslash in a name", "zip.unportable-name", .package([entry("Contents\\b.json") { _ in }])),
        ZipRuleCase(
            "a NUL in a name", "zip.unportable-name",
            .package([RawZipEntry(rawName: Array("Contents/b.json\u{0}.txt".utf8), [0x7b, 0x7d])])),
        ZipRuleCase(
            "a non-ASCII name without the UTF-8 flag", "zip.unportable-name",
            .package([entry("Contents/世界.json") { $0.flags = 0 }])),
        ZipRuleCase(
            "a Unicode Path field naming another file", "zip.unicode-path-mismatch",
            .package([entry("Contents/b.json") { $0.centralExtra = RawZip.unicodePath(headerName: $0.name, "Contents/c.json") }])),
        ZipRuleCase(
            "bzip2 (zipfile)", "zip.unsupported-method",
            python:
                "z = zipfile.ZipFile(out, 'w'); base(z); z.writestr('Contents/b.json', b'{}' * 50, compress_type=zipfile.ZIP_BZIP2); z.close()"
        ),
        ZipRuleCase(
            "LZMA (zipfile)", "zip.unsupported-method",
            python:
                "z = zipfile.ZipFile(out, 'w'); base(z); z.writestr('Contents/b.json', b'{}' * 50, compress_type=zipfile.ZIP_LZMA); z.close()"
        ),
        ZipRuleCase("zstd (method 93)", "zip.unsupported-method", .package([entry("Contents/b.json") { $0.method = 93 }])),
        ZipRuleCase("Deflate64 (method 9)", "zip.unsupported-method", .package([entry("Contents/b.json") { $0.method = 9 }])),
        ZipRuleCase("traditional encryption (bit 0)", "archive.encrypted", .package([entry("Contents/b.json") { $0.flags = 1 }])),
        ZipRuleCase(
            "AES encryption (method 99)", "archive.encrypted",
            .package([
                entry("Contents/b.json") {
                    $0.method = 99
                    $0.centralExtra = RawZip.extraField(0x9901, [2, 0, 0x41, 0x45, 3, 8, 0])
                }
            ])),
        ZipRuleCase(
            "__MACOSX/ under Contents/", "zip.apple-double",
            python:
                "z = zipfile.ZipFile(out, 'w'); base(z); z.writestr('Contents/__MACOSX/._a.json', b'\\0\\5\\26\\7'); z.close()"),
        ZipRuleCase(
            "an AppleDouble ._ file in Contents/", "zip.apple-double",
            python: "z = zipfile.ZipFile(out, 'w'); base(z); z.writestr('Contents/._a.json', b'\\0\\5\\26\\7'); z.close()"),
        ZipRuleCase("a local zip64 field whose sizes differ from the header's", "zip.zip64-mismatch", localSixtyFourDiffers),
        ZipRuleCase(
            "folder attributes on a name without '/' (zipfile)", "zip.entry-type-mismatch",
            python:
                "z = zipfile.ZipFile(out, 'w'); base(z); i = zipfile.ZipInfo('Contents/x'); i.create_system = 3; i.external_attr = (0o40755 << 16) | 0x10; z.writestr(i, b'data'); z.close()"
        ),
        ZipRuleCase("a folder entry with data", "zip.entry-type-mismatch", .package([RawZipEntry("Contents/d/", "data")])),
        ZipRuleCase(
            "a folder entry with a deflate stream longer than an empty one", "zip.entry-type-mismatch",
            .package([
                entry("Contents/d/") {
                    $0.method = 8
                    $0.data = [0x4b, 0x04, 0x00, 0x00, 0x00, 0x00]
                    $0.crc32 = 0
                    $0.uncompressedSize = 0
                }
            ])),
        ZipRuleCase(
            "an extra field running past the extra area", "archive.corrupt",
            .package([entry("Contents/b.json") { $0.centralExtra = le16(0xcafe) + le16(40) + [1, 2, 3] }])),
        ZipRuleCase(
            "bytes before the zip, offsets not moved (a self-extractor's stub)", "archive.unsupported-format",
            python:
                "z = zipfile.ZipFile(out, 'w'); base(z); z.close(); d = open(out, 'rb').read(); open(out, 'wb').write(b'MZ' + bytes(98) + d)"
        ),
        ZipRuleCase("a zip64 central value that fits in 32 bits", "zip.zip64-mismatch", sixtyFourUnneeded),
        ZipRuleCase("a central zip64 field longer than its saturated fields call for", "zip.zip64-mismatch", sixtyFourLonger),
        ZipRuleCase("a zip64 end record beside a complete end record, with another count", "zip.zip64-mismatch", endDiffersUnsaturated),
        ZipRuleCase("a zip64 end record that disagrees", "zip.zip64-mismatch", endInconsistent),
        // One verdict: what install refuses, verify reports as an error.
        ZipRuleCase(
            "a symlink inside the package", "content.symlink",
            python:
                "z = zipfile.ZipFile(out, 'w'); base(z); i = zipfile.ZipInfo('Contents/alias.json'); i.create_system = 3; i.external_attr = 0o120777 << 16; z.writestr(i, b'a.json'); z.close()"
        ),
    ]
}()

@Suite("zip rules: verify and install refuse alike, DEST untouched")
struct ZipRulesTests {
    @Test("verify exits 1 naming the rule; install exits 1 and leaves DEST as it was", arguments: zipRuleCases)
    func refused(_ zipCase: ZipRuleCase) throws {
        let folder = TemporaryFolder()
        folder.write("dest/mine.txt", "the user's file")
        let archive = folder.url("case.zip")
        zipCase.make(archive)
        try #require(FileManager.default.fileExists(atPath: archive))
        let verified = hcpack(["verify", archive])
        #expect(verified.status == 1, "\(verified.stdout)\(verified.stderr)")
        #expect(verified.stdout.contains("[\(zipCase.rule)]"), "\(verified.stdout)")
        let before = treeListing(folder.url("dest"))
        let installed = hcpack(["install", archive, "--dest", folder.url("dest")])
        #expect(installed.status == 1, "\(installed.stdout)\(installed.stderr)")
        #expect(installed.stdout.contains("[\(zipCase.rule)]"), "\(installed.stdout)")
        #expect(treeListing(folder.url("dest")) == before)
    }

    @Test(
        "Each zip rule's problem is an error in the JSON report, with a message that says what to change", arguments: zipRuleCases
    )
    func reportedAsError(_ zipCase: ZipRuleCase) throws {
        let folder = TemporaryFolder()
        let archive = folder.url("case.zip")
        zipCase.make(archive)
        let verified = hcpack(["verify", archive, "--json"])
        let problems = jsonObject(verified.stdout)?["problems"] as? [[String: Any]] ?? []
        let mine = problems.filter { $0["rule"] as? String == zipCase.rule }
        #expect(!mine.isEmpty, "\(verified.stdout)")
        #expect(mine.allSatisfy { $0["severity"] as? String == "error" })
        #expect(mine.allSatisfy { ($0["message"] as? String ?? "").count > 20 })
    }

    @Test("The byte-level writer's own package, unaltered, is valid: each case's refusal is its change alone")
    func baseIsValid() {
        let folder = TemporaryFolder()
        let archive = RawZip.package([]).write(to: folder.url("base.zip"))
        let verified = hcpack(["verify", archive])
        #expect(verified.status == 0, "\(verified.stdout)")
        folder.makeFolder("dest")
        let installed = hcpack(["install", archive, "--dest", folder.url("dest")])
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        #expect(folder.read("dest/a.json") == Array("{}".utf8))
    }
}

@Suite("zip.stored-descriptor: stored entries that Java's ZipInputStream refuses")
struct StoredDescriptorTests {
    @Test("bsdtar's stored zip is approved with one warning naming its first such entry; Java refuses it, hcpack build's version of it reads")
    func warnsOnOtherToolsZip() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let made = run(
            "env", ["LC_ALL=C.UTF-8", "bsdtar", "--format", "zip", "--options", "zip:compression=store", "-cf", folder.url("b.zip"), "ContentInfo.plist",
                "Contents"],
            in: folder.url("pkg"))
        try #require(made.status == 0, "\(made.output)")
        let verified = hcpack(["verify", folder.url("b.zip")])
        #expect(verified.status == 0, "\(verified.stdout)")
        let warnings = verified.stdout.split(separator: "\n").filter { $0.contains("[zip.stored-descriptor]") }
        #expect(warnings.count == 1, "\(verified.stdout)")
        #expect(
            warnings.first.map { $0.contains("warning:") && $0.contains("ContentInfo.plist") && $0.contains("other entries") } == true,
            "\(verified.stdout)")
        #expect(verified.stdout.contains("ZipInputStream") && verified.stdout.contains("hcpack build"))
        #expect(hcpack(["verify", folder.url("b.zip"), "--strict"]).status == 1, "--strict makes the warning count")
        folder.makeFolder("dest")
        #expect(hcpack(["install", folder.url("b.zip"), "--dest", folder.url("dest")]).status == 0)
        // A real reader disagrees: Java's ZipInputStream stops at the first stored entry.
        folder.makeFolder("java")
        let java = ZipReader.java.extract(folder.url("b.zip"), into: folder.url("java"))
        #expect(!java.ok && java.output.contains("only DEFLATED entries can have EXT descriptor"), "\(java.output)")
        // Rebuilt with hcpack build, stored: no warning, and Java reads it.
        let built = hcpack(["build", folder.url("pkg"), "-o", folder.url("h.zip"), "--compression", "store"])
        try #require(built.status == 0, "\(built.stdout)\(built.stderr)")
        #expect(hcpack(["verify", folder.url("h.zip"), "--strict"]).status == 0)
        folder.makeFolder("java-h")
        let rebuilt = ZipReader.java.extract(folder.url("h.zip"), into: folder.url("java-h"))
        #expect(rebuilt.ok, "\(rebuilt.output)")
    }
}

@Suite("One verdict: install refuses exactly what verify reports invalid")
struct OneVerdictTests {
    /// Shapes that verify once only warned about while install refused them.
    static let shapes = hostileArchives.filter {
        ["hard link inside", "symlink to itself", "setuid file", "setgid file"].contains($0.name)
    }

    @Test("verify and install give the same exit status and name the same rule", arguments: shapes)
    func sameVerdict(_ hostile: HostileArchive) throws {
        let folder = TemporaryFolder()
        let made = python(hostile.program, in: folder.path)
        try #require(made.status == 0, "\(made.output)")
        let archive = folder.url(hostile.file)
        let verified = hcpack(["verify", archive])
        folder.makeFolder("dest")
        let installed = hcpack(["install", archive, "--dest", folder.url("dest")])
        #expect(verified.status == 1, "\(verified.stdout)")
        #expect(installed.status == verified.status, "\(installed.stdout)\(installed.stderr)")
        #expect(hostile.rules.contains { verified.stdout.contains("[\($0)]") && installed.stdout.contains("[\($0)]") })
        #expect(treeListing(folder.url("dest")).isEmpty)
    }

    @Test("A package folder with a symlink still only warns: build leaves the link out, and the built zip installs")
    func folderSymlinkWarns() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        try FileManager.default.createSymbolicLink(
            atPath: folder.url("pkg/Contents/alias.json"), withDestinationPath: "index.json")
        let verified = hcpack(["verify", folder.url("pkg")])
        #expect(verified.status == 0 && verified.stdout.contains("[content.symlink]"), "\(verified.stdout)")
        let built = hcpack(["build", folder.url("pkg"), "-o", folder.url("p.zip")])
        try #require(built.status == 0, "\(built.stdout)\(built.stderr)")
        folder.makeFolder("dest")
        #expect(hcpack(["verify", folder.url("p.zip"), "--strict"]).status == 0)
        #expect(hcpack(["install", folder.url("p.zip"), "--dest", folder.url("dest")]).status == 0)
    }
}
