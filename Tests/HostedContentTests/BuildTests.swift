import ArchiveIO
import Digest
import Foundation
import HostedContent
import PropertyList
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Every regular file under `root`, by path relative to it.
func treeFiles(_ root: String) -> [String: [UInt8]] {
    var files: [String: [UInt8]] = [:]
    guard let walker = FileManager.default.enumerator(atPath: root) else { return files }
    for case let relative as String in walker {
        let full = root + "/" + relative
        var info = stat()
        guard lstat(full, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
        files[relative] = FileManager.default.contents(atPath: full).map { Array($0) } ?? []
    }
    return files
}

/// Extracts an archive with an independent tool (Info-ZIP unzip or bsdtar) into `folder`.
func extract(_ archive: String, format: BuildFormat, into folder: String) {
    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let result =
        format == .zip ? run("unzip", ["-q", archive, "-d", folder]) : run("bsdtar", ["-xzf", archive, "-C", folder])
    #expect(result.status == 0, "extracting \(archive): \(result.output)")
}

/// The sample files as they should appear under Contents/.
func expectedContents(_ files: [(String, String)] = sampleFiles) -> [String: [UInt8]] {
    Dictionary(uniqueKeysWithValues: files.map { ("Contents/" + $0.0, Array($0.1.utf8)) })
}

/// The package at `path` as files, extracting an archive first.
func builtFiles(_ path: String, format: BuildFormat, scratch: TemporaryFolder) -> [String: [UInt8]] {
    if format == .directory { return treeFiles(path) }
    let target = scratch.url("extracted-\(UUID().uuidString)")
    extract(path, format: format, into: target)
    return treeFiles(target)
}

/// "NAME METHOD" for each entry of a zip, as Python's zipfile reads it (0 stored, 8 deflated).
func zipCompressionMethods(_ archive: String) -> Set<String> {
    let result = python(
        """
        import sys, zipfile
        for i in zipfile.ZipFile(sys.argv[1]).infolist():
            print(i.filename, i.compress_type)
        """, arguments: [archive], in: "/")
    #expect(result.status == 0, "\(result.output)")
    return Set(result.output.split(separator: "\n").map(String.init))
}

let buildFormats: [BuildFormat] = [.zip, .tarGzip, .directory]

func outputName(_ format: BuildFormat) -> String { "out" + (format == .directory ? ".pkg" : format.fileExtension) }

@Suite("build: round trips")
struct BuildRoundTripTests {
    @Test("A plain folder becomes Contents/, with a generated Files list and integrity records", arguments: buildFormats)
    func plainFolder(_ format: BuildFormat) throws {
        let folder = TemporaryFolder()
        for (path, text) in sampleFiles { folder.write("src/" + path, text) }
        let output = folder.url(outputName(format))
        let options = BuildOptions(
            source: folder.url("src"), output: output, format: format, productIdentifier: "com.example.plain",
            contentVersion: "2.1")
        let result = try Builder.build(options)
        #expect(result.fileCount == sampleFiles.count)
        #expect(result.contentBytes == Int64(sampleFiles.reduce(0) { $0 + $1.1.utf8.count }))
        #expect(result.productIdentifier == "com.example.plain")

        let report = try Verifier.verify(output)
        #expect(report.problems.problems.isEmpty, "\(report.problems.problems)")
        #expect(report.listedFileCount == sampleFiles.count)

        var files = builtFiles(output, format: format, scratch: folder)
        let removed = files.removeValue(forKey: "ContentInfo.plist")
        let plist = try #require(removed)
        #expect(files == expectedContents())
        let info = try ContentInfo.decode(plist)
        #expect(info.productIdentifier == "com.example.plain")
        #expect(info.contentVersion == "2.1")
        // Byte order: "art/Café.txt" < "index.json" < "levels/1.json" < "levels/2.json".
        #expect(info.files == ["art/Café.txt", "index.json", "levels/1.json", "levels/2.json"])
        let integrity = try #require(info.integrity)
        for (path, text) in sampleFiles {
            #expect(
                integrity[path]
                    == FileRecord(size: Int64(text.utf8.count), sha256: Hasher.digest(.sha256, of: Array(text.utf8)).hexString))
        }
        #expect(String(decoding: plist.prefix(5), as: UTF8.self) == "<?xml")
    }

    @Test("A package folder keeps its Files and unknown keys; options override identity", arguments: buildFormats)
    func packageFolder(_ format: BuildFormat) throws {
        let folder = TemporaryFolder()
        let extra = "<key>CustomKey</key><string>kept</string><key>Nested</key><dict><key>n</key><integer>7</integer></dict>"
        writeValidPackage(in: folder, root: "pkg", extraKeys: extra)
        let output = folder.url(outputName(format))
        let options = BuildOptions(source: folder.url("pkg"), output: output, format: format, contentVersion: "1.1")
        let result = try Builder.build(options)
        #expect(result.contentVersion == "1.1")
        #expect(try Verifier.verify(output).problems.problems.isEmpty)

        var files = builtFiles(output, format: format, scratch: folder)
        let removed = files.removeValue(forKey: "ContentInfo.plist")
        let plist = try #require(removed)
        #expect(files == expectedContents())
        let info = try ContentInfo.decode(plist)
        #expect(info.files == sampleFiles.map(\.0), "Files kept in the source's order")
        #expect(info.dictionary["CustomKey"] == .string("kept"))
        #expect(info.dictionary["Nested"] == .dictionary(PlistDictionary([.init(key: "n", value: .integer(7))])))
        #expect(info.productIdentifier == "com.example.levels")
        #expect(info.contentVersion == "1.1")
        #expect(info.integrity?.count == sampleFiles.count)
    }

    @Test("Archives put ContentInfo.plist first, then Contents/ sorted by path bytes, with fixed metadata")
    func entryOrderAndMetadata() throws {
        let folder = TemporaryFolder()
        for name in ["b.json", "a/z.json", "a.json", "C.json", "a/b/c.json"] { folder.write("src/" + name, "{}") }
        for format in [BuildFormat.zip, .tarGzip] {
            let output = folder.url(outputName(format))
            try Builder.build(
                BuildOptions(source: folder.url("src"), output: output, productIdentifier: "p", contentVersion: "1"))
            let reader = try ArchiveReader(path: output)
            var names: [String] = []
            while let entry = try reader.next() {
                names.append(PackagePath.normalizeArchiveName(entry.path ?? ""))
                #expect(entry.modificationTime == BuildOptions.defaultSourceDateEpoch, "\(entry.path ?? "")")
                #expect(entry.permissions == (entry.kind == .directory ? 0o755 : 0o644), "\(entry.path ?? "")")
            }
            #expect(
                names == [
                    "ContentInfo.plist", "Contents", "Contents/C.json", "Contents/a", "Contents/a.json", "Contents/a/b",
                    "Contents/a/b/c.json",
                    "Contents/a/z.json", "Contents/b.json",
                ], "\(format)")
        }
        let owners = python(
            "import tarfile\nfor m in tarfile.open('out.tar.gz'): print(m.uid, m.gid, repr(m.uname), repr(m.gname))",
            in: folder.path)
        #expect(Set(owners.output.split(separator: "\n")) == ["0 0 '' ''"], "\(owners.output)")
    }
}

@Suite("build: reproducibility")
struct BuildReproducibilityTests {
    /// Writes the same content twice with different creation order, times and permissions.
    func makeSource(_ folder: TemporaryFolder, _ name: String, reversed: Bool, fileMode: mode_t, folderMode: mode_t, time: Int) {
        var files = sampleFiles + [("levels/empty.txt", ""), ("art/deep/x.json", "{\"x\": [1, 2, 3]}")]
        if reversed { files.reverse() }
        for (path, text) in files { folder.write(name + "/Contents/" + path, text) }
        folder.write(name + "/ContentInfo.plist", plistXML(standardKeysForBuild))
        folder.makeFolder(name + "/Contents/empty-folder")
        guard let walker = FileManager.default.enumerator(atPath: folder.url(name)) else { return }
        for case let relative as String in walker {
            let full = folder.url(name + "/" + relative)
            var info = stat()
            lstat(full, &info)
            chmod(full, info.st_mode & S_IFMT == S_IFDIR ? folderMode : fileMode)
            var times = [timeval(tv_sec: time, tv_usec: 0), timeval(tv_sec: time, tv_usec: 0)]
            utimes(full, &times)
        }
    }

    @Test("Same content, different mtimes, modes and creation order: byte-identical output", arguments: buildFormats)
    func identical(_ format: BuildFormat) throws {
        let folder = TemporaryFolder()
        makeSource(folder, "one", reversed: false, fileMode: 0o600, folderMode: 0o700, time: 1_000_000_000)
        makeSource(folder, "two", reversed: true, fileMode: 0o664, folderMode: 0o775, time: 1_700_000_000)
        var outputs: [String] = []
        for name in ["one", "two"] {
            let output = folder.url(name + "-" + outputName(format))
            try Builder.build(BuildOptions(source: folder.url(name), output: output, format: format))
            outputs.append(output)
        }
        if format == .directory {
            // Trees: same files, same modes, same times.
            let first = treeFiles(outputs[0])
            let second = treeFiles(outputs[1])
            #expect(first == second && first.count == 7)
            for relative in first.keys.sorted() + ["Contents", "Contents/empty-folder", "Contents/levels"] {
                var a = stat()
                var b = stat()
                lstat(outputs[0] + "/" + relative, &a)
                lstat(outputs[1] + "/" + relative, &b)
                #expect(a.st_mode == b.st_mode && a.st_mtim.tv_sec == b.st_mtim.tv_sec, "\(relative)")
                #expect(a.st_mtim.tv_sec == Int(BuildOptions.defaultSourceDateEpoch))
                #expect(a.st_mode & 0o7777 == (a.st_mode & S_IFMT == S_IFDIR ? 0o755 : 0o644), "\(relative)")
            }
        } else {
            let first = try #require(FileManager.default.contents(atPath: outputs[0]))
            let second = try #require(FileManager.default.contents(atPath: outputs[1]))
            #expect(first == second)
            #expect(first.count > 500)
        }
    }

    @Test("SOURCE_DATE_EPOCH changes every timestamp and nothing else")
    func sourceDateEpoch() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let output = folder.url("out.tar.gz")
        let result = try Builder.build(BuildOptions(source: folder.url("pkg"), output: output, sourceDateEpoch: 1_600_000_000))
        let reader = try ArchiveReader(path: output)
        var count = 0
        while let entry = try reader.next() {
            #expect(entry.modificationTime == 1_600_000_000)
            count += 1
        }
        #expect(count == 1 + 1 + 2 + sampleFiles.count)  // plist, Contents, art/ and levels/, files
        let again = try Builder.build(
            BuildOptions(source: folder.url("pkg"), output: folder.url("again.tar.gz"), sourceDateEpoch: 1_600_000_000))
        #expect(again.sha256 == result.sha256)
        let other = try Builder.build(BuildOptions(source: folder.url("pkg"), output: folder.url("other.tar.gz")))
        #expect(other.sha256 != result.sha256)
    }
}

let standardKeysForBuild =
    "<key>IAPProductIdentifier</key><string>com.example.levels</string><key>ContentVersion</key><string>1.0</string>"

/// A package source that must not build, and the rule that stops it.
struct BadSource: CustomStringConvertible, Sendable {
    let name: String
    let rule: Rule
    let make: @Sendable (TemporaryFolder) -> Void
    var description: String { name }
}

let badSources: [BadSource] = [
    BadSource(name: "plist without ContentVersion", rule: .plistMissingKey) { folder in
        writeValidPackage(in: folder, root: "src")
        folder.write("src/ContentInfo.plist", plistXML("<key>IAPProductIdentifier</key><string>com.example.levels</string>"))
    },
    BadSource(name: "a listed file is missing", rule: .filesNotFound) { folder in
        writeValidPackage(in: folder, root: "src")
        folder.remove("src/Contents/levels/2.json")
    },
    BadSource(name: "a symlink escaping the package", rule: .symlinkEscapes) { folder in
        writeValidPackage(in: folder, root: "src")
        symlink("../../../etc/passwd", folder.url("src/Contents/passwd"))
    },
    BadSource(name: "an ELF executable", rule: .executable) { folder in
        writeValidPackage(in: folder, root: "src")
        folder.write("src/Contents/tool", [0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0, count: 56))
    },
    BadSource(name: "an invalid product identifier override", rule: .productIdentifierSyntax) { folder in
        writeValidPackage(in: folder, root: "src")
        folder.write(
            "src/ContentInfo.plist",
            plistXML("<key>IAPProductIdentifier</key><string>not valid!</string><key>ContentVersion</key><string>1</string>"))
    },
    BadSource(name: "an unparsable plist", rule: .plistParse) { folder in
        writeValidPackage(in: folder, root: "src")
        folder.write("src/ContentInfo.plist", "<plist><dict><key>x</dict>")
    },
]

@Suite("build: refusals")
struct BuildRefusalTests {
    @Test("A bad source is reported with its rule, and nothing is written", arguments: badSources)
    func badSource(_ source: BadSource) throws {
        let folder = TemporaryFolder()
        source.make(folder)
        folder.makeFolder("out")
        for format in buildFormats {
            let options = BuildOptions(source: folder.url("src"), output: folder.url("out/" + outputName(format)), format: format)
            let plan = try Builder.prepare(options)
            #expect(!plan.isValid)
            #expect(plan.report.problems.rules.contains(source.rule), "\(plan.report.problems.problems)")
            #expect(throws: HCPackError.self) { try Builder.write(plan, options: options) }
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url("out")).isEmpty)
        }
    }

    @Test("A missing source is not found; a file source and a plain folder without identity are refused")
    func sourceErrors() throws {
        let folder = TemporaryFolder()
        let missing = #expect(throws: HCPackError.self) {
            try Builder.prepare(BuildOptions(source: folder.url("nope"), output: folder.url("o.zip")))
        }
        #expect(missing?.code == .notFound)
        folder.write("file.txt", "x")
        let file = #expect(throws: HCPackError.self) {
            try Builder.prepare(BuildOptions(source: folder.url("file.txt"), output: folder.url("o.zip")))
        }
        #expect(file?.code == .invalidRequest)
        folder.write("plain/a.json", "{}")
        let identity = #expect(throws: HCPackError.self) {
            try Builder.prepare(BuildOptions(source: folder.url("plain"), output: folder.url("o.zip"), productIdentifier: "p"))
        }
        #expect(identity?.code == .invalidRequest)
        #expect(identity?.message.contains("--content-version") == true)
        #expect(!FileSystem.exists(folder.url("o.zip")))
    }

    @Test("An existing output is refused without force and replaced with it, for files and folders", arguments: buildFormats)
    func existingOutput(_ format: BuildFormat) throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let output = folder.url(outputName(format))
        if format == .directory {
            folder.write(outputName(format) + "/old.txt", "old")
        } else {
            folder.write(outputName(format), "old")
        }
        let options = BuildOptions(source: folder.url("pkg"), output: output, format: format)
        let refused = #expect(throws: HCPackError.self) { try Builder.build(options) }
        #expect(refused?.code == .invalidRequest)
        #expect(refused?.message.contains("--force") == true)
        let oldPath = format == .directory ? output + "/old.txt" : output
        #expect(FileManager.default.contents(atPath: oldPath) == Data("old".utf8))

        var forced = options
        forced.force = true
        try Builder.build(forced)
        #expect(!FileSystem.exists(output + "/old.txt"))
        #expect(try Verifier.verify(output).isValid(strict: true))
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["pkg", outputName(format)].sorted())
    }

    @Test("A format that contradicts the output name, or a name without a known extension, is refused")
    func formatMismatch() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let mismatch = #expect(throws: HCPackError.self) {
            try Builder.prepare(BuildOptions(source: folder.url("pkg"), output: folder.url("o.zip"), format: .tarGzip))
        }
        #expect(mismatch?.code == .invalidRequest)
        let unknown = #expect(throws: HCPackError.self) {
            try Builder.prepare(BuildOptions(source: folder.url("pkg"), output: folder.url("o.rar")))
        }
        #expect(unknown?.message.contains("--format") == true)
        #expect(try Builder.prepare(BuildOptions(source: folder.url("pkg"), output: folder.url("o.tgz"))).format == .tarGzip)
    }

    @Test("A file that changes after validation fails the build and leaves nothing behind")
    func changedBetweenPasses() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        folder.makeFolder("out")
        for format in buildFormats {
            folder.write("pkg/Contents/levels/1.json", "{\"level\": 1}\n")
            let options = BuildOptions(source: folder.url("pkg"), output: folder.url("out/" + outputName(format)), format: format)
            let plan = try Builder.prepare(options)
            #expect(plan.isValid)
            folder.write("pkg/Contents/levels/1.json", "{\"level\": 7}\n")  // same size, other bytes
            let error = #expect(throws: HCPackError.self) { try Builder.write(plan, options: options) }
            #expect(error?.message.contains("levels/1.json changed") == true, "\(String(describing: error))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url("out")).isEmpty, "\(format)")
        }
    }
}

@Suite("build: exclusions and compression")
struct BuildContentTests {
    @Test("Junk and --exclude matches are left out and reported")
    func exclusions() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        // Files is generated, so nothing left out can be listed.
        folder.write("pkg/ContentInfo.plist", plistXML(standardKeysForBuild))
        for junk in [
            "Contents/.DS_Store", "Contents/art/._Café.txt", "Contents/__MACOSX/x", "Contents/.git/HEAD", "Contents/Thumbs.db",
            ".DS_Store",
        ] {
            folder.write("pkg/" + junk, "junk")
        }
        folder.write("pkg/Contents/notes.tmp", "scratch")
        folder.write("pkg/Contents/raw/big.psd", "source art")
        folder.write("pkg/Contents/levels/draft.json", "{}")
        let options = BuildOptions(
            source: folder.url("pkg"), output: folder.url("out.zip"), excludes: ["*.tmp", "raw/", "levels/draft.json"])
        let result = try Builder.build(options)
        let excluded = Dictionary(uniqueKeysWithValues: result.excluded.map { ($0.path, $0.reason) })
        #expect(excluded[".DS_Store"] == .junk)
        #expect(excluded["Contents/.DS_Store"] == .junk)
        #expect(excluded["Contents/__MACOSX"] == .junk, "a junk folder is reported once")
        #expect(excluded["Contents/.git"] == .junk)
        #expect(excluded["Contents/Thumbs.db"] == .junk)
        #expect(excluded["Contents/art/._Café.txt"] == .junk)
        #expect(excluded["Contents/notes.tmp"] == .pattern("*.tmp"))
        #expect(excluded["Contents/raw"] == .pattern("raw"))
        #expect(excluded["Contents/levels/draft.json"] == .pattern("levels/draft.json"))
        #expect(result.excluded.count == 9)
        #expect(result.fileCount == sampleFiles.count)
        let files = builtFiles(folder.url("out.zip"), format: .zip, scratch: folder)
        #expect(Set(files.keys) == Set(expectedContents().keys).union(["ContentInfo.plist"]))
    }

    @Test("Auto compression stores what does not shrink and deflates what does")
    func autoPolicy() {
        let png: [UInt8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] + [UInt8](repeating: 0, count: 4096)
        #expect(CompressionPolicy.auto.choose(head: png) == .store, "PNG by magic, though its tail is zeros")
        var generator = SystemRandomNumberGenerator()
        let random = (0..<(128 << 10)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        #expect(CompressionPolicy.auto.choose(head: random) == .store)
        let json = Array(String(repeating: "{\"level\": 1, \"name\": \"opening\"},\n", count: 100).utf8)
        #expect(CompressionPolicy.auto.choose(head: json) == .deflate)
        #expect(CompressionPolicy.auto.choose(head: Array("{}".utf8)) == .store, "tiny files are stored")
        #expect(CompressionPolicy.store.choose(head: json) == .store)
        #expect(CompressionPolicy.deflate.choose(head: random) == .deflate)
        for magic in [
            [0xff, 0xd8, 0xff, 0xe0], Array("GIF89a".utf8), Array("RIFF\0\0\0\0WEBP".utf8),
            [0, 0, 0, 0x18] + Array("ftypheic".utf8),
            Array("ID3".utf8), Array("OggS".utf8), [0x50, 0x4b, 0x03, 0x04], [0x1f, 0x8b], [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00],
            [0x28, 0xb5, 0x2f, 0xfd], Array("%PDF-1.7".utf8),
        ] as [[UInt8]] {
            let head = magic + Array(repeating: UInt8(ascii: "a"), count: 200)
            #expect(head.withUnsafeBytes { CompressionPolicy.compressedFormat($0) } != nil, "\(magic)")
            #expect(CompressionPolicy.auto.choose(head: head) == .store)
        }
        #expect(random.withUnsafeBytes { CompressionPolicy.entropy($0) } > 7.9)
        #expect(json.withUnsafeBytes { CompressionPolicy.entropy($0) } < 5)
    }

    @Test("Auto compression in a built zip: PNG and random data stored, JSON deflated (per Python's zipfile)")
    func autoInZip() throws {
        let folder = TemporaryFolder()
        folder.write("src/image.png", [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] + [UInt8](repeating: 7, count: 5000))
        var generator = SystemRandomNumberGenerator()
        folder.write("src/noise.bin", (0..<(200 << 10)).map { _ in UInt8.random(in: 0...255, using: &generator) })
        folder.write("src/data.json", String(repeating: "{\"level\": 1, \"name\": \"opening\"},\n", count: 200))
        let output = folder.url("out.zip")
        try Builder.build(BuildOptions(source: folder.url("src"), output: output, productIdentifier: "p", contentVersion: "1"))
        let lines = zipCompressionMethods(folder.url("out.zip"))
        #expect(
            lines.isSuperset(of: ["Contents/image.png 0", "Contents/noise.bin 0", "Contents/data.json 8", "ContentInfo.plist 8"]),
            "\(lines)")
        let stored = try Builder.build(
            BuildOptions(
                source: folder.url("src"), output: folder.url("stored.zip"), productIdentifier: "p", contentVersion: "1",
                compression: .store))
        #expect(stored.outputBytes > stored.contentBytes)
    }

    @Test("Files in the source plist is kept: unlisted files warn and get no record")
    func keptFilesList() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        folder.write("pkg/Contents/extra.json", "{}")
        let plan = try Builder.prepare(BuildOptions(source: folder.url("pkg"), output: folder.url("o.zip")))
        #expect(plan.isValid)
        #expect(plan.report.problems.rules == [.filesUnlisted])
        #expect(plan.contentInfo?.files == sampleFiles.map(\.0))
        #expect(plan.contentInfo?.integrity?.keys.sorted() == sampleFiles.map(\.0).sorted())
    }

    @Test("A symlink inside the package is left out with a warning")
    func innerSymlink() throws {
        let folder = TemporaryFolder()
        folder.write("src/a.json", "{}")
        symlink("a.json", folder.url("src/alias.json"))
        let result = try Builder.build(
            BuildOptions(source: folder.url("src"), output: folder.url("o.zip"), productIdentifier: "p", contentVersion: "1"))
        #expect(result.problems.rules == [.symlink])
        #expect(result.excluded == [ExcludedEntry(path: "Contents/alias.json", reason: .symlink)])
        #expect(try Verifier.verify(folder.url("o.zip")).problems.problems.isEmpty)
    }
}

@Suite("init: templates")
struct PackageTemplateTests {
    @Test("A scaffold from the source tree's template verifies with no errors and builds")
    func scaffoldVerifies() throws {
        let folder = TemporaryFolder()
        let template = try PackageTemplate.locate(executablePath: nil)
        let created = try template.scaffold(folder.url("pkg"), productIdentifier: "com.example.new", contentVersion: "3.2")
        #expect(created.contains(folder.url("pkg/Contents")))
        let report = try Verifier.verify(folder.url("pkg"))
        #expect(!report.problems.hasErrors, "\(report.problems.problems)")
        #expect(report.contentInfo?.productIdentifier == "com.example.new")
        #expect(report.contentInfo?.contentVersion == "3.2")
        folder.write("pkg/Contents/a.json", "{}")
        let result = try Builder.build(BuildOptions(source: folder.url("pkg"), defaultOutputFolder: folder.path))
        #expect(result.output == folder.url("com.example.new-3.2.zip"))
        #expect(try Verifier.verify(result.output).isValid(strict: true))
    }

    @Test("Found via an explicit folder, HCPACK_TEMPLATES, the installed layout, then the source tree")
    func lookupOrder() throws {
        let folder = TemporaryFolder()
        let source = try #require(FileManager.default.contents(atPath: PackageTemplate.sourceTreeFolder + "/ContentInfo.plist"))
        for name in ["explicit", "env", "prefix/share/hcpack/Templates"] {
            folder.write(name + "/ContentInfo.plist", Array(source))
        }
        let installedBinary = folder.url("prefix/bin/hcpack")
        let environment = [PackageTemplate.environmentVariable: folder.url("env")]

        #expect(
            try PackageTemplate.locate(
                explicit: folder.url("explicit"), environment: environment, executablePath: installedBinary
            ).folder == folder.url("explicit"))
        #expect(try PackageTemplate.locate(environment: environment, executablePath: installedBinary).folder == folder.url("env"))
        #expect(try PackageTemplate.locate(executablePath: installedBinary).folder == folder.url("prefix/share/hcpack/Templates"))
        #expect(
            try PackageTemplate.locate(executablePath: folder.url("elsewhere/bin/hcpack")).folder
                == PackageTemplate.sourceTreeFolder)
        let none = #expect(throws: HCPackError.self) {
            try PackageTemplate.locate(executablePath: folder.url("x/bin/hcpack"), sourceTree: nil)
        }
        #expect(none?.code == .notFound)
        #expect(none?.message.contains(PackageTemplate.environmentVariable) == true)
        let badEnvironment = #expect(throws: HCPackError.self) {
            try PackageTemplate.locate(
                environment: [PackageTemplate.environmentVariable: folder.url("missing")], executablePath: installedBinary)
        }
        #expect(badEnvironment?.message.contains(folder.url("missing")) == true)
    }

    @Test("Bad identifiers and versions, non-empty folders and existing plists are refused")
    func refusals() throws {
        let folder = TemporaryFolder()
        let template = try PackageTemplate.locate(executablePath: nil)
        for identifier in ["", "has space", "slash/id", String(repeating: "a", count: 101)] {
            let error = #expect(throws: HCPackError.self) {
                try template.scaffold(folder.url("a"), productIdentifier: identifier)
            }
            #expect(error?.code == .invalidRequest)
        }
        #expect(throws: HCPackError.self) {
            try template.scaffold(folder.url("a"), productIdentifier: "ok", contentVersion: "1.x")
        }
        #expect(!FileSystem.exists(folder.url("a")))

        folder.write("busy/notes.txt", "mine")
        let busy = #expect(throws: HCPackError.self) { try template.scaffold(folder.url("busy"), productIdentifier: "ok") }
        #expect(busy?.message.contains("--force") == true)
        try template.scaffold(folder.url("busy"), productIdentifier: "ok", force: true)
        #expect(folder.read("busy/notes.txt") == Array("mine".utf8))
        let plist = folder.read("busy/ContentInfo.plist")
        let again = #expect(throws: HCPackError.self) {
            try template.scaffold(folder.url("busy"), productIdentifier: "other", force: true)
        }
        #expect(again?.message.contains("never overwrites") == true)
        #expect(folder.read("busy/ContentInfo.plist") == plist)
    }

    @Test("A template without the placeholders is refused")
    func brokenTemplate() throws {
        let folder = TemporaryFolder()
        folder.write("t/ContentInfo.plist", plistXML("<key>IAPProductIdentifier</key><string>fixed</string>"))
        let error = #expect(throws: HCPackError.self) {
            try PackageTemplate(folder: folder.url("t")).scaffold(folder.url("pkg"), productIdentifier: "com.example.x")
        }
        #expect(error?.message.contains("{{PRODUCT_ID}}") == true)
        #expect(!FileSystem.exists(folder.url("pkg")))
    }
}

@Suite("build: output inside the source")
struct BuildOwnOutputTests {
    @Test(
        "Rebuilding a plain folder into itself leaves the previous output and temporaries out",
        arguments: [BuildFormat.zip, .directory])
    func outputInsideSource(_ format: BuildFormat) throws {
        let folder = TemporaryFolder()
        for (path, text) in sampleFiles { folder.write("src/" + path, text) }
        let options = BuildOptions(
            source: folder.url("src") + "/", defaultOutputFolder: folder.url("src"), format: format,
            productIdentifier: "com.example.self",
            contentVersion: "1", force: true)
        let first = try Builder.build(options)
        #expect(first.output == folder.url("src/com.example.self-1" + format.fileExtension))
        folder.write("src/.com.example.self-1\(format.fileExtension).hcpack-AbC123", "a crashed build's leftover")
        let second = try Builder.build(options)
        #expect(second.fileCount == sampleFiles.count)
        #expect(Set(second.excluded.map(\.reason)) == [.buildOutput])
        #expect(second.excluded.count == 2)
        if format == .zip { #expect(second.sha256 == first.sha256) }
    }
}

/// Replaces pkg/ContentInfo.plist with a binary plist of `dictionary` (a Python literal), keys in the given order.
func writeBinaryPlist(_ dictionary: String, in folder: TemporaryFolder, sourceLocation: SourceLocation = #_sourceLocation) {
    let made = python(
        """
        import plistlib
        d = \(dictionary)
        open('pkg/ContentInfo.plist', 'wb').write(plistlib.dumps(d, fmt=plistlib.FMT_BINARY, sort_keys=False))
        """, in: folder.path)
    #expect(made.status == 0, "\(made.output)", sourceLocation: sourceLocation)
}

@Suite("build: plist handling")
struct BuildPlistTests {
    @Test("A binary source plist is written back as XML, keys and values kept")
    func binarySourcePlist() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        writeBinaryPlist("{'IAPProductIdentifier': 'com.example.binary', 'ContentVersion': '4', 'Extra': [1, True, 'x']}", in: folder)
        #expect(folder.read("pkg/ContentInfo.plist")?.starts(with: Array("bplist00".utf8)) == true)
        let result = try Builder.build(BuildOptions(source: folder.url("pkg"), output: folder.url("out.pkg"), format: .directory))
        #expect(result.productIdentifier == "com.example.binary")
        let bytes = try #require(folder.read("out.pkg/ContentInfo.plist"))
        #expect(bytes.starts(with: Array("<?xml".utf8)))
        let info = try ContentInfo.decode(bytes)
        #expect(info.dictionary["Extra"] == .array([.integer(1), .boolean(true), .string("x")]))
        #expect(info.files?.count == sampleFiles.count, "generated: the binary plist had no Files")
        #expect(info.dictionary.keys == ["IAPProductIdentifier", "ContentVersion", "Extra", "Files", "HCPackIntegrity"])
    }

    @Test("A stale HCPackIntegrity in the source is replaced by fresh records")
    func staleIntegrityReplaced() throws {
        let folder = TemporaryFolder()
        let stale =
            "<key>HCPackIntegrity</key><dict><key>index.json</key><dict><key>Size</key><integer>1</integer>"
            + "<key>SHA256</key><string>\(String(repeating: "0", count: 64))</string></dict></dict>"
        writeValidPackage(in: folder, root: "pkg", extraKeys: stale)
        #expect(try Verifier.verify(folder.url("pkg")).problems.hasErrors, "the source itself fails verify")
        let result = try Builder.build(BuildOptions(source: folder.url("pkg"), output: folder.url("out.zip")))
        #expect(result.problems.problems.isEmpty)
        #expect(try Verifier.verify(folder.url("out.zip")).isValid(strict: true))
    }
}

@Suite("build: progress")
struct BuildProgressTests {
    final class Updates { var all: [ProgressUpdate] = [] }

    @Test("Progress reports the hashing pass, then packing up to every byte and file")
    func updates() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let updates = Updates()
        let result = try Builder.build(
            BuildOptions(source: folder.url("pkg"), output: folder.url("o.zip")), progress: { updates.all.append($0) })
        let checking = updates.all.filter { $0.phase == "checking" }
        let packing = updates.all.filter { $0.phase == "packing" }
        #expect(checking.count == sampleFiles.count)
        #expect(packing.last?.completedBytes == result.contentBytes)
        #expect(packing.last?.completedFiles == result.fileCount)
        #expect(packing.allSatisfy { $0.totalBytes == result.contentBytes && $0.totalFiles == sampleFiles.count })
        #expect(zip(packing, packing.dropFirst()).allSatisfy { $0.completedBytes <= $1.completedBytes })
    }
}

@Suite("build: the generated plist is checked by parsing it")
struct BuildGeneratedPlistTests {
    @Test("A source string that XML cannot carry (U+0001, from a binary plist) is a plist error, and nothing is written")
    func unwritableString() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        writeBinaryPlist("{'IAPProductIdentifier': 'com.example.binary', 'ContentVersion': '4', 'Note': 'a\\x01b'}", in: folder)
        let options = BuildOptions(source: folder.url("pkg"), output: folder.url("out.zip"))
        let plan = try Builder.prepare(options)
        #expect(plan.report.problems.rules.contains(.plistParse), "\(plan.report.problems.problems)")
        #expect(!plan.isValid)
        #expect(throws: HCPackError.self) { try Builder.write(plan, options: options) }
        #expect(!FileManager.default.fileExists(atPath: folder.url("out.zip")))
    }

    @Test("The report's plist is the generated one: Files and records for every file, the same as decoding the output")
    func reportMatchesOutput() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let options = BuildOptions(source: folder.url("pkg"), output: folder.url("out.pkg"), format: .directory)
        let plan = try Builder.prepare(options)
        #expect(plan.isValid, "\(plan.report.problems.problems)")
        _ = try Builder.write(plan, options: options)
        let written = try ContentInfo.decode(try #require(folder.read("out.pkg/ContentInfo.plist")))
        #expect(plan.report.contentInfo?.dictionary == written.dictionary)
        #expect(plan.report.contentInfo?.integrity?.count == sampleFiles.count)
    }
}
