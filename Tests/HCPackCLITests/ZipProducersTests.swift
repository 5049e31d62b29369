import ArchiveIO
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The package folders every producer zips: the same files with ASCII names, with Latin names and with
/// Japanese names; empty files, nested folders, compressible and incompressible data.
enum ProducerSource: String, CaseIterable, Sendable {
    case ascii, latin, japanese

    var files: [String: [UInt8]] {
        var files: [String: [UInt8]] = [
            "index.json": Array("{\"title\": \"Levels\"}\n".utf8),
            "empty.txt": [],
            "sub/deep/level.json": Array("{\"deep\": true}\n".utf8),
            "data/repeated.txt": Array(String(repeating: "hosted content ", count: 4_000).utf8),
            "data/noise.bin": (0..<20_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) },
        ]
        switch self {
        case .ascii: break
        case .latin:
            files["art/Café.txt"] = Array("non-ASCII name\n".utf8)
            files["art/naïve résumé.txt"] = Array("spaces and accents\n".utf8)
        case .japanese:
            files["日本語/ファイル.txt"] = Array("日本語のテキスト\n".utf8)
            files["日本語/空/empty.txt"] = []
        }
        return files
    }

    /// Writes the package folder `root` (ContentInfo.plist listing every file, and Contents/) in `folder`.
    func write(in folder: TemporaryFolder, at root: String) {
        for (path, bytes) in files { folder.write(root + "/Contents/" + path, bytes) }
        let listed = files.keys.sorted().map { "<string>\($0)</string>" }.joined()
        folder.write(
            root + "/ContentInfo.plist",
            plistXML(
                "<key>IAPProductIdentifier</key><string>com.example.producers</string><key>ContentVersion</key><string>1.0</string><key>Files</key><array>\(listed)</array>"
            ))
    }
}

/// What a producer wrote: the central directory and local headers, read byte for byte.
struct ZipShape {
    var entries: [ZipEntryFacts] = []
    var directory: ZipDirectory?

    init(_ archive: String) {
        var entries: [ZipEntryFacts] = []
        directory = try? ZipDirectory.read(path: archive) { entries.append($0) }
        self.entries = entries
    }

    var folders: [ZipEntryFacts] { entries.filter(\.isDirectoryName) }
    var files: [ZipEntryFacts] { entries.filter { !$0.isDirectoryName } }
    /// Some name has non-ASCII bytes without the UTF-8 flag: readers decode it differently.
    var hasUnflaggedNames: Bool { entries.contains { $0.name.contains { $0 >= 0x80 } && !$0.isUTF8 } }
    func named(_ suffix: String) -> ZipEntryFacts? {
        entries.first { String(decoding: $0.name, as: UTF8.self).hasSuffix(suffix) }
    }
}

/// One way teams zip a package folder, and what it must have written for the case to test what it says.
struct ZipProducer: Sendable, CustomStringConvertible {
    let name: String
    /// Zips the package folder at `source` into `archive` (the folder itself as the archive's top folder when
    /// the producer is told so, else its contents at the root).
    let make: @Sendable (_ source: String, _ archive: String) -> (status: Int32, output: String)
    /// What the producer wrote that this case relies on; a message when it wrote something else.
    let shape: @Sendable (ZipShape) -> String?

    var description: String { name }

    init(
        _ name: String, make: @escaping @Sendable (String, String) -> (status: Int32, output: String),
        shape: @escaping @Sendable (ZipShape) -> String? = { _ in nil }
    ) {
        self.name = name
        self.make = make
        self.shape = shape
    }

    /// A producer run in the package folder with `arguments`, where "OUT" is the archive.
    init(_ name: String, inFolder arguments: [String], shape: @escaping @Sendable (ZipShape) -> String? = { _ in nil }) {
        self.init(
            name,
            make: { source, archive in run("env", ["LC_ALL=C.UTF-8"] + arguments.map { $0 == "OUT" ? archive : $0 }, in: source)
            },
            shape: shape)
    }

    /// A Python program run with the package folder and the archive as `sys.argv[1]` and `sys.argv[2]`.
    init(_ name: String, python script: String, shape: @escaping @Sendable (ZipShape) -> String? = { _ in nil }) {
        self.init(
            name,
            make: { source, archive in
                run(
                    "python3",
                    ["-c", "import os, sys, zipfile, shutil\nsrc, out = sys.argv[1], sys.argv[2]\n" + script, source, archive])
            }, shape: shape)
    }
}

/// A Python loop over the package folder: `each(path, name, is_dir)` for every entry below `src`, sorted.
private let pythonWalk = """
    def walk(each):
        for root, dirs, files in os.walk(src):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(root, name)
                each(path, os.path.relpath(path, src), os.path.isdir(path))

    """

/// Every producer installable on Debian 12 (`make deps`), in the modes teams use.
let zipProducers: [ZipProducer] = [
    ZipProducer("Info-ZIP zip -r", inFolder: ["zip", "-q", "-r", "OUT", "."]) {
        $0.folders.isEmpty || !$0.files.contains { $0.method == 8 } ? "expected folder entries and deflated files" : nil
    },
    ZipProducer("Info-ZIP zip -r -D (no folder entries)", inFolder: ["zip", "-q", "-r", "-D", "OUT", "."]) {
        $0.folders.isEmpty ? nil : "folder entries written"
    },
    ZipProducer("Info-ZIP zip -r -0 (stored)", inFolder: ["zip", "-q", "-r", "-0", "OUT", "."]) {
        $0.entries.allSatisfy { $0.method == 0 } ? nil : "a compressed entry"
    },
    ZipProducer("Info-ZIP zip -r -X -9", inFolder: ["zip", "-q", "-r", "-X", "-9", "OUT", "."]),
    ZipProducer("Info-ZIP zip -r -fz (forced zip64)", inFolder: ["zip", "-q", "-r", "-fz", "OUT", "."]) { shape in
        // zip 3.0 saturates the local sizes (zip64 field with both) and the central offset, and adds a zip64
        // end record, for entries that would fit in 32 bits.
        guard shape.directory?.zip64End != nil else { return "no zip64 end record" }
        return shape.entries.allSatisfy { $0.local?.zip64?.saturatedFields == 2 && $0.zip64 != nil }
            ? nil
            : "an entry without zip64 fields"
    },
    ZipProducer(
        "Info-ZIP zip -r with the folder as the top folder",
        make: { source, archive in
            let parent = (source as NSString).deletingLastPathComponent
            return run("env", ["LC_ALL=C.UTF-8", "zip", "-q", "-r", archive, (source as NSString).lastPathComponent], in: parent)
        }),
    ZipProducer(
        "Python zipfile, stored",
        python: pythonWalk + """
            with zipfile.ZipFile(out, 'w', zipfile.ZIP_STORED) as z:
                walk(lambda path, name, is_dir: z.write(path, name))
            """),
    ZipProducer(
        "Python zipfile, deflated, writestr folders",
        python: pythonWalk + """
            with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
                walk(lambda path, name, is_dir: z.writestr(name + '/', b'') if is_dir else z.writestr(name, open(path, 'rb').read()))
            """
    ) { shape in
        // The issue's first class: writestr("d/", b"") deflates nothing into 2 bytes.
        shape.folders.isEmpty
            || !shape.folders.allSatisfy { $0.method == 8 && $0.compressedSize == 2 && $0.uncompressedSize == 0 }
            ? "folder entries are not empty deflate streams" : nil
    },
    ZipProducer(
        "Python zipfile, force_zip64",
        python: pythonWalk + """
            def add(path, name, is_dir):
                if is_dir: return
                with z.open(name, 'w', force_zip64=True) as f: f.write(open(path, 'rb').read())
            with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
                walk(add)
            """
    ) { shape in
        // 3.11.4 and later saturate the local sizes; Debian 12's 3.11.2 writes them beside a zip64 field
        // (gh-103861). Either way every local header has a zip64 field that no size needs.
        shape.files.allSatisfy { $0.local?.zip64?.hasField == true } ? nil : "a local header without a zip64 field"
    },
    ZipProducer("Python shutil.make_archive", python: "shutil.make_archive(out[:-4], 'zip', src)"),
    ZipProducer("Java jar cfM", inFolder: ["jar", "cfM", "OUT", "-C", ".", "."]),
    ZipProducer("Java jar cf (with a manifest)", inFolder: ["jar", "cf", "OUT", "-C", ".", "."]) {
        $0.named("META-INF/MANIFEST.MF") == nil ? "no manifest" : nil
    },
    ZipProducer(
        "Java ZipOutputStream",
        make: { source, archive in
            guard let classes = javaZipper else { return (127, "javac failed") }
            return run("env", ["LC_ALL=C.UTF-8", "java", "-cp", classes, "ZipFolder", source, archive])
        }
    ) { shape in
        // The issue's first class, as Gradle, Maven and Android tooling write it: deflated folder entries.
        shape.folders.isEmpty
            || !shape.folders.allSatisfy { $0.method == 8 && $0.compressedSize == 2 && $0.uncompressedSize == 0 }
            ? "folder entries are not empty deflate streams" : nil
    },
    ZipProducer(
        "Go archive/zip",
        make: { source, archive in
            guard let zipper = goZipper else { return (127, "go build failed") }
            return run(zipper, [source, archive])
        }
    ) { shape in
        shape.files.contains { $0.hasDataDescriptor } ? nil : "no data descriptors"
    },
    ZipProducer("7-Zip", inFolder: ["7zz", "a", "-bd", "-tzip", "OUT", "."]),
    ZipProducer("7-Zip, stored (-mx=0)", inFolder: ["7zz", "a", "-bd", "-tzip", "-mx=0", "OUT", "."]) {
        $0.entries.allSatisfy { $0.method == 0 } ? nil : "a compressed entry"
    },
    ZipProducer("bsdtar --format zip", inFolder: ["bsdtar", "--format", "zip", "-cf", "OUT", "."]),
    ZipProducer(
        "bsdtar --format zip, stored",
        inFolder: ["bsdtar", "--format", "zip", "--options", "zip:compression=store", "-cf", "OUT", "."]),
    ZipProducer("macOS Finder's Compress (written byte for byte)", python: finderZip) { shape in
        shape.named("__MACOSX/pkg/._ContentInfo.plist") == nil ? "no AppleDouble file" : nil
    },
]

/// A zip as macOS Finder's Compress (Archive Utility, `ditto -c -k --sequesterRsrc --keepParent`) writes it
/// for a folder whose files carry extended attributes: the folder as the top folder, files deflated with data
/// descriptors, no extra fields, names without the UTF-8 flag, and for each file with extended attributes an
/// AppleDouble file under `__MACOSX/` at the root.
private let finderZip =
    pythonWalk + """
        import struct, zlib
        top = os.path.basename(src)
        records, blob = [], bytearray()
        def appledouble():
            # Header (magic, version 2, 'Mac OS X' filler), a Finder info entry holding an ATTR block with one
            # extended attribute, and an empty resource fork, as copyfile(3) writes them.
            name, value = b'com.apple.quarantine\\0', b'0083;6569a1b2;Safari;'
            entry = struct.pack('>IIHB', 0, len(value), 0, len(name)) + name
            entry += bytes(-len(entry) % 4)
            attr_start = 50 + 32 + 2
            data_start = attr_start + 36 + len(entry)
            total = data_start + len(value)
            attr = struct.pack('>IIIIIIIIHH', 0x41545452, 0, total, data_start, len(value), 0, 0, 0, 0, 1)
            entry = struct.pack('>I', data_start) + entry[4:]
            finder = bytes(32) + bytes(2) + attr + entry + value
            fork = bytes(256) + b'This resource fork intentionally left blank' + bytes(30)
            head = struct.pack('>II16sH', 0x00051607, 0x00020000, b'Mac OS X        ', 2)
            head += struct.pack('>III', 9, 50, len(finder)) + struct.pack('>III', 2, 50 + len(finder), len(fork))
            return head + finder + fork
        def add(name, data, mode):
            raw = name.encode()
            offset = len(blob)
            if data is None:
                blob.extend(struct.pack('<IHHHHHIIIHH', 0x04034b50, 10, 0, 0, 0x6b5a, 0x5982, 0, 0, 0, len(raw), 0) + raw)
                records.append((raw, 0, 0, 0, 0, 0, mode, offset, 10))
                return
            packer = zlib.compressobj(6, zlib.DEFLATED, -15)
            packed = packer.compress(data) + packer.flush()
            crc = zlib.crc32(data)
            blob.extend(struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 8, 8, 0x6b5a, 0x5982, 0, 0, 0, len(raw), 0) + raw + packed)
            blob.extend(struct.pack('<IIII', 0x08074b50, crc, len(packed), len(data)))
            records.append((raw, 8, 8, crc, len(packed), len(data), mode, offset, 20))
        def each(path, name, is_dir):
            if is_dir:
                add(top + '/' + name + '/', None, 0o40755)
                return
            add(top + '/' + name, open(path, 'rb').read(), 0o100644)
            if name in ('ContentInfo.plist', 'Contents/index.json'):
                if not any(r[0] == b'__MACOSX/' for r in records):
                    add('__MACOSX/', None, 0o40755)
                    add('__MACOSX/' + top + '/', None, 0o40755)
                folder = os.path.dirname(name)
                if folder and not any(r[0] == ('__MACOSX/' + top + '/' + folder + '/').encode() for r in records):
                    add('__MACOSX/' + top + '/' + folder + '/', None, 0o40755)
                add('__MACOSX/' + top + '/' + (folder + '/' if folder else '') + '._' + os.path.basename(name), appledouble(), 0o100644)
        add(top + '/', None, 0o40755)
        walk(each)
        central = bytearray()
        for raw, flags, method, crc, csize, usize, mode, offset, needed in records:
            central += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 0x0315, needed, flags, method, 0x6b5a, 0x5982, crc, csize, usize,
                                   len(raw), 0, 0, 0, 0, mode << 16, offset) + raw
        end = struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, len(records), len(records), len(central), len(blob), 0)
        open(out, 'wb').write(blob + central + end)
        """

/// `ZipFolder SOURCE ARCHIVE`, a Java program that zips a folder with `java.util.zip.ZipOutputStream` as build
/// tools do (every entry deflated, folders too); compiled once into a fixed folder; nil without a JDK.
let javaZipper: String? = {
    let folder = NSTemporaryDirectory() + "/hcpack-javazip-v1-\(getuid())"
    if FileManager.default.fileExists(atPath: folder + "/classes/ZipFolder.class") { return folder + "/classes" }
    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let source = """
        import java.io.*;
        import java.nio.file.*;
        import java.util.*;
        import java.util.zip.*;

        public class ZipFolder {
            public static void main(String[] args) throws IOException {
                Path root = Paths.get(args[0]);
                List<Path> paths = new ArrayList<>();
                try (var walk = Files.walk(root)) { walk.sorted().forEach(paths::add); }
                try (ZipOutputStream out = new ZipOutputStream(new FileOutputStream(args[1]))) {
                    for (Path path : paths) {
                        if (path.equals(root)) continue;
                        String name = root.relativize(path).toString().replace(File.separatorChar, '/');
                        if (Files.isDirectory(path)) {
                            out.putNextEntry(new ZipEntry(name + "/"));
                        } else {
                            out.putNextEntry(new ZipEntry(name));
                            out.write(Files.readAllBytes(path));
                        }
                        out.closeEntry();
                    }
                }
            }
        }

        """
    FileManager.default.createFile(atPath: folder + "/ZipFolder.java", contents: Data(source.utf8))
    // Compiled into a new folder and renamed, so a concurrent run never loads a half-written class.
    let building = "classes-\(getpid())"
    guard run("javac", ["-d", building, "ZipFolder.java"], in: folder).status == 0 else { return nil }
    if rename(folder + "/" + building, folder + "/classes") != 0 {
        try? FileManager.default.removeItem(atPath: folder + "/" + building)
    }
    return folder + "/classes"
}()

/// `gozip SOURCE ARCHIVE`: a folder zipped with Go's archive/zip (files deflated through `CreateHeader`, which
/// writes data descriptors; folders as Go writes them); built once; nil without Go.
let goZipper: String? = {
    let folder = NSTemporaryDirectory() + "/hcpack-gozip-v1-\(getuid())"
    let binary = folder + "/gozip"
    if FileManager.default.isExecutableFile(atPath: binary) { return binary }
    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let source = """
        package main

        import (
        \t"archive/zip"
        \t"io"
        \t"os"
        \t"path/filepath"
        )

        func main() {
        \tout, err := os.Create(os.Args[2])
        \tif err != nil {
        \t\tpanic(err)
        \t}
        \tw := zip.NewWriter(out)
        \troot := os.Args[1]
        \terr = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
        \t\tif err != nil || path == root {
        \t\t\treturn err
        \t\t}
        \t\trel, _ := filepath.Rel(root, path)
        \t\theader, err := zip.FileInfoHeader(info)
        \t\tif err != nil {
        \t\t\treturn err
        \t\t}
        \t\theader.Name = filepath.ToSlash(rel)
        \t\tif info.IsDir() {
        \t\t\theader.Name += "/"
        \t\t\t_, err = w.CreateHeader(header)
        \t\t\treturn err
        \t\t}
        \t\theader.Method = zip.Deflate
        \t\tdst, err := w.CreateHeader(header)
        \t\tif err != nil {
        \t\t\treturn err
        \t\t}
        \t\tsrc, err := os.Open(path)
        \t\tif err != nil {
        \t\t\treturn err
        \t\t}
        \t\tdefer src.Close()
        \t\t_, err = io.Copy(dst, src)
        \t\treturn err
        \t})
        \tif err != nil {
        \t\tpanic(err)
        \t}
        \tif err := w.Close(); err != nil {
        \t\tpanic(err)
        \t}
        \tout.Close()
        }

        """
    FileManager.default.createFile(atPath: folder + "/main.go", contents: Data(source.utf8))
    let building = binary + "-\(getpid())"
    guard run("env", ["GO111MODULE=off", "go", "build", "-o", building, "main.go"], in: folder).status == 0,
        rename(building, binary) == 0
    else { return nil }
    return binary
}()

/// Each reader's Contents/ as it unpacked `archive` (the package root is the archive root or the single folder
/// holding ContentInfo.plist), with what failed.
func contentsByReader(_ archive: String, readers: [ZipReader], in folder: TemporaryFolder) -> [(
    ZipReader, [String: [UInt8]], String?
)] {
    var result: [(ZipReader, [String: [UInt8]], String?)] = []
    for reader in readers {
        let name = "readers-\(reader.rawValue)"
        folder.remove(name)
        folder.makeFolder(name)
        let (ok, output) = reader.extract(archive, into: folder.url(name))
        let tree = filesUnder(folder.url(name))
        let plist = tree.keys.filter { $0 == "ContentInfo.plist" || $0.hasSuffix("/ContentInfo.plist") }.min {
            $0.count < $1.count
        }
        let prefix = (plist.map { String($0.dropLast("ContentInfo.plist".count)) } ?? "") + "Contents/"
        let contents = Dictionary(
            uniqueKeysWithValues: tree.filter { $0.key.hasPrefix(prefix) }.map {
                (String($0.key.dropFirst(prefix.count)), $0.value)
            })
        result.append((reader, contents, ok ? nil : output))
        folder.remove(name)
    }
    return result
}

/// One producer's zip of one source, made in `folder`; nil (with a recorded issue) when the producer failed or
/// wrote another shape than the case relies on.
private func makeZip(_ producer: ZipProducer, _ source: ProducerSource, in folder: TemporaryFolder) -> String? {
    source.write(in: folder, at: "pkg")
    let archive = folder.url("made.zip")
    let made = producer.make(folder.url("pkg"), archive)
    guard made.status == 0, FileManager.default.fileExists(atPath: archive) else {
        Issue.record("\(producer) failed: \(made.output)")
        return nil
    }
    if let wrong = producer.shape(ZipShape(archive)) {
        Issue.record("\(producer) wrote another shape than this case relies on: \(wrong)")
        return nil
    }
    return archive
}

@Suite("Producers' corpus: zips that ordinary tools make from a valid package are approved as they are")
struct ZipProducersTests {
    @Test(
        "Each producer's zip is approved and installs exactly the source's files, as zipfile, miniunzip and Go (unzip for ASCII names) extract them; or it is refused with the rule of a real disagreement",
        arguments: zipProducers, ProducerSource.allCases)
    func producer(_ producer: ZipProducer, _ source: ProducerSource) throws {
        let folder = TemporaryFolder()
        let archive = try #require(makeZip(producer, source, in: folder))
        let shape = ZipShape(archive)
        let expected = source.files
        var readers: [ZipReader] = [.zipfile, .miniunzip]
        try #require(
            ZipReader.goExtractor != nil, "Go's archive/zip is one of the readers compared (make deps installs golang-go)")
        readers.append(.go)
        // Debian's unzip decodes UTF-8 names through the locale: it judges ASCII names only.
        if source == .ascii { readers.append(.unzip) }
        let verified = hcpack(["verify", archive])
        folder.write("dest/mine.txt", "the user's file")
        let installed = hcpack(["install", archive, "--dest", folder.url("dest")])
        if shape.hasUnflaggedNames {
            // Info-ZIP's zip 3.0 on Linux and Finder write UTF-8 names without the flag: zipfile decodes them as
            // CP437, Go keeps their bytes. Refused, and the message says how to fix it.
            #expect(verified.status == 1 && verified.stdout.contains("[zip.unportable-name]"), "\(verified.stdout)")
            #expect(
                verified.stdout.contains("mark the names UTF-8") && verified.stdout.contains("hcpack build"), "\(verified.stdout)"
            )
            #expect(installed.status == 1, "\(installed.stdout)\(installed.stderr)")
            #expect(filesUnder(folder.url("dest")) == ["mine.txt": Array("the user's file".utf8)])
            let trees = contentsByReader(archive, readers: [.zipfile, .go], in: folder)
            #expect(Set(trees[0].1.keys) != Set(trees[1].1.keys), "the readers agree, so the refusal has no reason")
            #expect(trees[1].1 == expected, "Go keeps the bytes as they were")
            return
        }
        #expect(verified.status == 0, "\(verified.stdout)")
        #expect(!verified.stdout.contains("error:"), "\(verified.stdout)")
        #expect(!verified.stdout.contains("[zip.gap]"), "no producer leaves bytes between entries: \(verified.stdout)")
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        var placed = filesUnder(folder.url("dest")).filter { !$0.key.hasPrefix(".hcpack/") }
        #expect(placed.removeValue(forKey: "mine.txt") != nil)
        #expect(placed == expected, "install placed \(placed.keys.sorted()), the source has \(expected.keys.sorted())")
        for (reader, contents, failure) in contentsByReader(archive, readers: readers, in: folder) {
            #expect(failure == nil, "\(reader) failed: \(failure ?? "")")
            #expect(contents == expected, "\(reader) extracted \(contents.keys.sorted())")
        }
    }

    @Test("Finder's __MACOSX/ at the root is a warning, and none of it is installed")
    func finderJunk() throws {
        let producer = try #require(zipProducers.first { $0.name.hasPrefix("macOS Finder") })
        let folder = TemporaryFolder()
        let archive = try #require(makeZip(producer, .ascii, in: folder))
        let verified = hcpack(["verify", archive])
        #expect(verified.status == 0, "\(verified.stdout)")
        #expect(verified.stdout.contains("warning: [content.junk] __MACOSX"), "\(verified.stdout)")
        #expect(!verified.stdout.contains("[zip.apple-double]"), "\(verified.stdout)")
        #expect(hcpack(["verify", archive, "--strict"]).status == 1, "--strict makes the warning count")
        folder.makeFolder("dest")
        let installed = hcpack(["install", archive, "--dest", folder.url("dest")])
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        #expect(!filesUnder(folder.url("dest")).keys.contains { $0.contains("__MACOSX") || $0.contains("._") })
    }
}

/// Shapes the zip rules once refused although no reader unpacks them differently (issue 27), written byte for byte.
let approvedZipShapes: [ZipRuleCase] = {
    let data = Array("{\"x\": 1}".utf8)
    func entry(_ change: (inout RawZipEntry) -> Void) -> RawZipEntry {
        var entry = RawZipEntry("Contents/b.json", data)
        change(&entry)
        return entry
    }
    let sixtyFour = RawZip.extraField(0x0001, le64(UInt64(data.count)) + le64(UInt64(data.count)))
    var padded = RawZip.package([RawZipEntry("Contents/b.json", data)], listing: ["a.json", "b.json"])
    padded.entries[1].afterData = Array(repeating: 0, count: 100)
    var paddedAtEnd = RawZip.package([RawZipEntry("Contents/b.json", data)], listing: ["a.json", "b.json"])
    paddedAtEnd.entries[2].afterData = Array(repeating: 0, count: 100)
    var endNotNeeded = RawZip.package([], listing: ["a.json"])
    endNotNeeded.zip64End = true
    return [
        ZipRuleCase(
            "a folder entry holding an empty deflate stream (Java's ZipOutputStream, zipfile's writestr)", "",
            .package([
                {
                    var folder = RawZipEntry("Contents/d/", [0x03, 0x00])
                    folder.method = 8
                    folder.crc32 = 0
                    folder.uncompressedSize = 0
                    folder.externalAttributes = 0o40755 << 16 | 0x10
                    return folder
                }()
            ])),
        ZipRuleCase(
            "a local zip64 field beside 32-bit sizes (Python 3.11.2's force_zip64)", "",
            .package([entry { $0.localExtra = sixtyFour }], listing: ["a.json", "b.json"])),
        ZipRuleCase(
            "saturated local sizes with a zip64 field, none in the central record (Python 3.11.4's force_zip64)", "",
            .package(
                [
                    entry {
                        $0.localExtra = sixtyFour
                        $0.localCompressedSize = 0xffff_ffff
                        $0.localUncompressedSize = 0xffff_ffff
                    }
                ], listing: ["a.json", "b.json"])),
        ZipRuleCase("a zip64 end record where none is needed, with the same values (zip -fz)", "", endNotNeeded),
        ZipRuleCase("zeros between two entries (Java's ZipInputStream stops there)", "zip.gap", padded),
        ZipRuleCase("zeros after the last entry, before the central directory", "", paddedAtEnd),
        ZipRuleCase(
            "data descriptors that agree: signed, unsigned, and 8-byte sizes after a local zip64 field (stored: Java refuses those, a warning)", "zip.stored-descriptor",
            .package(
                [
                    RawZipEntry("Contents/b.json", data), RawZipEntry("Contents/c.json", data), RawZipEntry("Contents/d.json", data),
                ].enumerated().map { index, entry in
                    var entry = entry
                    entry.flags = 8
                    entry.localCRC32 = 0
                    entry.localCompressedSize = 0
                    entry.localUncompressedSize = 0
                    if index == 2 { entry.localExtra = RawZip.extraField(0x0001, le64(0) + le64(0)) }
                    entry.afterData = RawZip.descriptor(
                        crc32: RawZip.crc32(data), compressed: UInt64(data.count), uncompressed: UInt64(data.count),
                        signed: index != 1, wide: index == 2)
                    return entry
                }, listing: ["a.json", "b.json", "c.json", "d.json"])),
        ZipRuleCase(
            "__MACOSX/ beside the package (Finder)", "content.junk",
            python:
                "z = zipfile.ZipFile(out, 'w'); base(z); z.writestr('__MACOSX/Contents/._a.json', b'\\0\\5\\26\\7'); z.close()"),
    ]
}()

@Suite("Zip shapes that readers unpack alike are approved (issue 27)")
struct ZipApprovedShapesTests {
    @Test("verify approves (warnings allowed), install places what every reader unpacks", arguments: approvedZipShapes)
    func approved(_ zipCase: ZipRuleCase) throws {
        let folder = TemporaryFolder()
        let archive = folder.url("case.zip")
        zipCase.make(archive)
        let verified = hcpack(["verify", archive])
        #expect(verified.status == 0, "\(verified.stdout)")
        if !zipCase.rule.isEmpty { #expect(verified.stdout.contains("warning: [\(zipCase.rule)]"), "\(verified.stdout)") }
        if zipCase.rule.isEmpty { #expect(!verified.stdout.contains("[zip."), "\(verified.stdout)") }
        let (disagreements, placed) = readerDisagreements(archive, in: folder)
        #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
        #expect(placed >= 1)
    }

    @Test("A xar archive's refusal says once what hcpack reads")
    func xarMessage() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let made = run("bsdtar", ["--format", "xar", "-cf", folder.url("p.xar"), "."], in: folder.url("pkg"))
        try #require(made.status == 0, "\(made.output)")
        let verified = hcpack(["verify", folder.url("p.xar")])
        #expect(verified.status == 1 && verified.stdout.contains("[archive.unsupported-format]"), "\(verified.stdout)")
        #expect(verified.stdout.components(separatedBy: "hcpack reads").count == 2, "\(verified.stdout)")
        #expect(verified.stdout.contains("xar"), "\(verified.stdout)")
    }
}
