import ArchiveIO
import HostedContent
import TestSupport
import Testing

/// Archive formats that hcpack reads, each made by an independent tool.
let archiveMakers: [(name: String, command: [String])] = [
    // libarchive marks non-ASCII names UTF-8 (bit 11) in a UTF-8 locale; Debian's Info-ZIP does not (see below).
    ("zip", ["env", "LC_ALL=C.UTF-8", "bsdtar", "--format", "zip", "-cf", "OUT", "."]),
    ("tar", ["bsdtar", "-cf", "OUT", "."]),
    ("tar.gz", ["bsdtar", "-czf", "OUT", "."]),
    ("tar.bz2", ["bsdtar", "-cjf", "OUT", "."]),
    ("tar.xz", ["bsdtar", "-cJf", "OUT", "."]),
    ("tar.zst", ["bsdtar", "--zstd", "-cf", "OUT", "."]),
]

@Suite("verify: archives")
struct VerifierArchiveTests {
    @Test("A valid package verifies in every archive format, detected by content", arguments: archiveMakers.map(\.name))
    func everyFormat(_ format: String) throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let command = try #require(archiveMakers.first { $0.name == format }?.command)
        // A misleading extension: detection must not depend on it.
        let output = folder.url("download.bin")
        let result = run(command[0], command.dropFirst().map { $0 == "OUT" ? output : $0 }, in: folder.url("pkg"))
        #expect(result.status == 0, "\(result.output)")
        let report = try Verifier.verify(output)
        #expect(report.problems.problems.isEmpty, "\(format): \(report.problems.problems)")
        #expect(report.listedFileCount == sampleFiles.count)
        #expect(report.contentFileCount == sampleFiles.count)
    }

    @Test("The package root may be a single top-level folder")
    func singleTopFolder() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "levels-1.0")
        let zipped = run("env", ["LC_ALL=C.UTF-8", "bsdtar", "--format", "zip", "-cf", folder.url("p.zip"), "levels-1.0"], in: folder.path)
        try #require(zipped.status == 0, "\(zipped.output)")
        let report = try Verifier.verify(folder.url("p.zip"))
        #expect(report.problems.problems.isEmpty, "\(report.problems.problems)")
        #expect(report.snapshot.rootFolder == "levels-1.0")
    }

    @Test("Info-ZIP's zip stores a non-ASCII name without the UTF-8 flag: refused, since readers decode it differently")
    func infoZipNonASCII() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let zipped = run("zip", ["-qrX", folder.url("p.zip"), "."], in: folder.url("pkg"))
        try #require(zipped.status == 0, "\(zipped.output)")
        // The shape this test is about: Info-ZIP left the non-ASCII name unflagged and the ASCII ones too.
        let shapes = zipEntryShapes(folder.url("p.zip"))
        let unflagged = shapes.filter { !$0.value.utf8Name }.keys.sorted()
        try #require(shapes.count >= 5 && unflagged.count == shapes.count, "\(shapes)")
        let report = try Verifier.verify(folder.url("p.zip"))
        #expect(report.problems.problems.map(\.rule) == [.zipUnportableName], "\(report.problems.problems)")
        #expect(report.problems.problems.first?.path == "Contents/art/Café.txt")
    }

    @Test("Two package roots in one archive are refused")
    func multipleRoots() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "a")
        writeValidPackage(in: folder, root: "b")
        let zipped = run("zip", ["-qrX", folder.url("p.zip"), "a", "b"], in: folder.path)
        try #require(zipped.status == 0, "\(zipped.output)")
        #expect(zipEntryShapes(folder.url("p.zip")).keys.contains { $0.hasPrefix("b/") })
        #expect(try Verifier.verify(folder.url("p.zip")).problems.rules.contains(.multipleRoots))
    }

    @Test("Unsafe names, duplicates, links and devices in a tar are reported")
    func hostileTar() throws {
        let folder = TemporaryFolder()
        let result = python(
            """
            import tarfile, io
            t = tarfile.open('bad.tar', 'w', format=tarfile.PAX_FORMAT)
            def add(name, data=b'x', **kw):
                i = tarfile.TarInfo(name); i.size = len(data)
                for k, v in kw.items(): setattr(i, k, v)
                t.addfile(i, io.BytesIO(data) if i.type == tarfile.REGTYPE else None)
            plist = open('plist.xml','rb').read()
            add('ContentInfo.plist', plist)
            add('Contents/a.json', b'{}')
            add('../escape.txt')
            add('/abs.txt')
            add('Contents/a.json', b'{"again": 1}')
            add('Contents/hl', type=tarfile.LNKTYPE, linkname='../outside', size=0)
            add('Contents/dev', type=tarfile.CHRTYPE, devmajor=1, devminor=3, size=0)
            add('Contents/ln', type=tarfile.SYMTYPE, linkname='/etc/passwd', size=0)
            t.close()
            """.replacingOccurrences(of: "plist.xml", with: folder.write("plist.xml", plistXML(standardKeys + filesXML(["a.json"])))),
            in: folder.path)
        #expect(result.status == 0, "\(result.output)")
        let report = try Verifier.verify(folder.url("bad.tar"))
        let rules = report.problems.rules
        #expect(rules.isSuperset(of: [.unsafePath, .duplicateEntry, .hardlinkEscapes, .specialFile, .symlinkEscapes]), "\(rules)")
        #expect(report.problems.problems.filter { $0.rule == .unsafePath }.count == 2)
    }

    @Test("Encrypted entries are refused")
    func encrypted() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let zipped = run("zip", ["-qrX", "-P", "secret", folder.url("p.zip"), "."], in: folder.url("pkg"))
        try #require(zipped.status == 0, "\(zipped.output)")
        let encrypted = zipEntryShapes(folder.url("p.zip")).filter { $0.value.encrypted }
        #expect(encrypted.keys.contains("ContentInfo.plist"), "zip -P encrypted no file: \(encrypted)")
        #expect(try Verifier.verify(folder.url("p.zip")).problems.rules.contains(.encrypted))
    }

    @Test("A corrupted zip is reported as corrupt, not as missing files")
    func corruptZip() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg", files: [("big.txt", String(repeating: "hosted content ", count: 2000))])
        let zipped = run("zip", ["-qrX", "-0", folder.url("p.zip"), "."], in: folder.url("pkg"))
        try #require(zipped.status == 0, "\(zipped.output)")
        #expect(zipEntryShapes(folder.url("p.zip"))["Contents/big.txt"]?.method == 0, "zip -0 stores")
        var bytes = try #require(folder.read("p.zip"))
        let marker = Array("hosted content hosted".utf8)
        let offset = try #require((0..<(bytes.count - marker.count)).first { Array(bytes[$0..<($0 + marker.count)]) == marker })
        bytes[offset + 100] ^= 0xff
        folder.write("p.zip", bytes)
        let report = try Verifier.verify(folder.url("p.zip"))
        #expect(report.problems.rules.contains(.corrupt), "\(report.problems.problems)")
        #expect(!report.isValid())
    }

    @Test("Random bytes are an unsupported format (exit 1), not a crash")
    func randomBytes() throws {
        let folder = TemporaryFolder()
        folder.write("noise.zip", (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) })
        let report = try Verifier.verify(folder.url("noise.zip"))
        #expect(report.problems.rules.contains(.unsupportedFormat))
    }

    @Test("A zip bomb trips the compression-ratio limit")
    func zipBomb() throws {
        let folder = TemporaryFolder()
        let result = python(
            """
            import zipfile
            plist = open('plist.xml','rb').read()
            with zipfile.ZipFile('bomb.zip', 'w', zipfile.ZIP_DEFLATED) as z:
                z.writestr('ContentInfo.plist', plist)
                z.writestr('Contents/zeros.bin', b'\\0' * (64 << 20))
            """.replacingOccurrences(of: "plist.xml", with: folder.write("plist.xml", plistXML(standardKeys + filesXML(["zeros.bin"])))),
            in: folder.path)
        #expect(result.status == 0, "\(result.output)")
        var options = VerifyOptions()
        options.limits.archive.maxCompressionRatio = 100
        options.limits.archive.ratioGraceBytes = 1 << 20
        let report = try Verifier.verify(folder.url("bomb.zip"), options: options)
        #expect(report.problems.rules.contains(.compressionRatio), "\(report.problems.problems)")
    }
}
