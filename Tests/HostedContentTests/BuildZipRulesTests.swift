import ArchiveIO
import Foundation
import HostedContent
import TestSupport
import Testing

/// Every combination of build options that changes what is written.
struct BuildVariant: CustomStringConvertible, Sendable {
    var format: BuildFormat
    var compression: CompressionPolicy
    var epoch: Int64
    var plainFolder: Bool
    var excludes: [String]

    var description: String {
        "\(format.rawValue) \(compression.rawValue) epoch \(epoch)\(plainFolder ? " plain" : "")\(excludes.isEmpty ? "" : " exclude")"
    }

    static let all: [BuildVariant] = BuildFormat.allCases.filter { $0 != .directory }.flatMap { format in
        CompressionPolicy.allCases.flatMap { compression in
            [(Int64(315_532_800), false, [String]()), (0, true, []), (4_102_444_800, false, ["*.bin"])].map {
                BuildVariant(format: format, compression: compression, epoch: $0.0, plainFolder: $0.1, excludes: $0.2)
            }
        }
    }
}

@Suite("hcpack build never writes what the zip rules refuse")
struct BuildZipRulesTests {
    @Test(
        "Every build option gives a package verify approves with no zip problem; zips hold only portable records",
        arguments: BuildVariant.all)
    func everyOption(_ variant: BuildVariant) throws {
        let folder = TemporaryFolder()
        let files: [(String, String)] =
            sampleFiles + [
                ("日本語/ファイル.txt", "日本語\n"), ("empty.txt", ""), ("a/b/c/deep.json", "{}\n"),
                ("big.txt", String(repeating: "hosted content ", count: 5000)),
                ("noise.bin", String(repeating: "\u{1}\u{ff}", count: 300)),
            ]
        // Files lists what is built: with an exclusion, the excluded file is in the folder but not listed.
        writeValidPackage(
            in: folder, root: "pkg", files: variant.excludes.isEmpty ? files : files.filter { !$0.0.hasSuffix(".bin") })
        folder.write("pkg/Contents/noise.bin", String(repeating: "\u{1}\u{ff}", count: 300))
        if variant.plainFolder { folder.remove("pkg/ContentInfo.plist") }
        let output = folder.url("out." + variant.format.rawValue)
        _ = try Builder.build(
            BuildOptions(
                source: folder.url(variant.plainFolder ? "pkg/Contents" : "pkg"), output: output, format: variant.format,
                productIdentifier: variant.plainFolder ? "com.example.plain" : nil,
                contentVersion: variant.plainFolder ? "1.0" : nil,
                compression: variant.compression, excludes: variant.excludes, sourceDateEpoch: variant.epoch))
        let report = try Verifier.verify(output)
        #expect(report.problems.problems.isEmpty, "\(report.problems.problems)")
        #expect(report.contentFileCount == files.count - variant.excludes.count)
        guard variant.format == .zip else { return }
        let (directory, entries) = try ZipDirectory.entries(path: output)
        #expect(directory.defects.isEmpty && directory.zip64End == nil && directory.end?.trailingBytes == 0)
        #expect(entries.count == directory.entryCount && UInt64(entries.count) == directory.declaredEntries)
        for entry in entries {
            let name = String(decoding: entry.name, as: UTF8.self)
            #expect(entry.method == 0 || entry.method == 8, "\(name)")
            #expect(entry.flags & 0x2041 == 0, "\(name): no encryption")
            #expect(entry.isUTF8 || entry.name.allSatisfy { $0 < 0x80 }, "\(name): non-ASCII names are flagged UTF-8")
            #expect(!entry.name.contains(UInt8(ascii: "\\")) && !entry.name.contains(0))
            #expect(entry.extra.unicodePath == nil && entry.zip64 == nil && entry.local?.zip64 == nil)
            #expect(entry.local?.name == entry.name && entry.local?.method == entry.method)
        }
        #expect(entries.contains { $0.method == 8 } == (variant.compression != .store))
    }
}

@Suite("zip64 where it is needed is fine")
struct NeededZip64Tests {
    @Test("65,537 entries need a zip64 end record: consistent records are approved, with no zip problem")
    func manyEntries() throws {
        let folder = TemporaryFolder()
        let made = python(
            """
            import plistlib, sys, zipfile
            files = ['%05d' % i for i in range(65535)]
            info = {'IAPProductIdentifier': 'com.example.many', 'ContentVersion': '1.0', 'Files': files}
            with zipfile.ZipFile(sys.argv[1], 'w') as z:
                z.writestr('ContentInfo.plist', plistlib.dumps(info))
                z.writestr(zipfile.ZipInfo('Contents/'), b'')
                for name in files: z.writestr('Contents/' + name, b'')
            """, arguments: [folder.url("many.zip")], in: folder.path)
        try #require(made.status == 0, "\(made.output)")
        let (directory, _) = try ZipDirectory.entries(path: folder.url("many.zip"))
        #expect(directory.zip64End?.totalEntries == 65_537 && directory.end?.totalEntries == 0xffff)
        let report = try Verifier.verify(folder.url("many.zip"))
        #expect(report.problems.problems.isEmpty, "\(report.problems.problems.prefix(5))")
        #expect(report.contentFileCount == 65_535)
    }
}
