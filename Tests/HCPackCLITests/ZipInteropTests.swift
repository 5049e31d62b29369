import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Regular files under `root` by relative path, with their bytes; a symlink or special file shows as a marker,
/// so a reader that makes a link where install makes a file is told apart.
func filesUnder(_ root: String) -> [String: [UInt8]] {
    var result: [String: [UInt8]] = [:]
    guard let walker = FileManager.default.enumerator(atPath: root) else { return result }
    while let relative = walker.nextObject() as? String {
        var info = stat()
        guard lstat(root + "/" + relative, &info) == 0 else { continue }
        switch info.st_mode & S_IFMT {
        case S_IFREG: result[relative] = FileManager.default.contents(atPath: root + "/" + relative).map { Array($0) } ?? []
        case S_IFDIR: continue
        default: result[relative] = Array("<not a regular file: mode \(String(info.st_mode, radix: 8))>".utf8)
        }
    }
    return result
}

/// The zip readers compared with `hcpack install`: what apps use (minizip, which SSZipArchive descends from)
/// and the reference readers (Info-ZIP unzip, Python's zipfile, and Go's archive/zip), and Java's
/// ZipInputStream (Android apps' streaming reader), which refuses what other tools write (a stored entry with
/// a data descriptor), so it is compared on what hcpack writes.
enum ZipReader: String, CaseIterable, Sendable {
    case unzip, zipfile, miniunzip, go, java

    /// The readers every machine that ran `make deps` has; Go's is compared in tests of its own, which a run
    /// without Go reports as skipped (Requirement.go).
    static let withoutGo: [ZipReader] = [.unzip, .zipfile, .miniunzip]

    /// Extracts `archive` into the empty folder `into`; false when the reader failed.
    func extract(_ archive: String, into folder: String) -> (ok: Bool, output: String) {
        let result: (status: Int32, output: String)
        switch self {
        case .unzip: result = run("unzip", ["-q", "-o", archive, "-d", folder])
        case .zipfile:
            result = python(
                "import sys, zipfile\nzipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])", arguments: [archive, folder],
                in: folder)
        case .miniunzip: result = run("miniunzip", ["-x", "-o", archive, "-d", folder], in: folder)
        case .go:
            switch Self.goExtractor {
            case .success(let extractor): result = run(extractor, [archive, folder])
            case .failure(let failure): result = (127, failure.output)
            }
        case .java:
            switch Self.javaExtractor {
            case .success(let classes):
                result = run("env", ["LC_ALL=C.UTF-8", "java", "-cp", classes, "StreamExtract", archive, folder])
            case .failure(let failure): result = (127, failure.output)
            }
        }
        return (result.status == 0, result.output)
    }

    /// `StreamExtract ARCHIVE FOLDER`: every entry as java.util.zip.ZipInputStream reads it, front to back from
    /// the local headers, as an Android app unpacks a download; compiled once into a fixed folder (make deps
    /// installs the JDK), or why javac failed.
    static let javaExtractor: Result<String, ExtractorBuildFailure> = {
        let folder = NSTemporaryDirectory() + "/hcpack-javaextract-v1-\(getuid())"
        if FileManager.default.fileExists(atPath: folder + "/classes/StreamExtract.class") { return .success(folder + "/classes") }
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let source = """
            import java.io.*;
            import java.nio.file.*;
            import java.util.zip.*;

            public class StreamExtract {
                public static void main(String[] args) throws IOException {
                    Path root = Paths.get(args[1]).toAbsolutePath().normalize();
                    try (ZipInputStream in = new ZipInputStream(new BufferedInputStream(new FileInputStream(args[0])))) {
                        ZipEntry entry;
                        while ((entry = in.getNextEntry()) != null) {
                            Path target = root.resolve(entry.getName()).normalize();
                            if (!target.startsWith(root)) throw new IOException("outside the folder: " + entry.getName());
                            if (entry.isDirectory()) { Files.createDirectories(target); continue; }
                            Files.createDirectories(target.getParent());
                            Files.copy(in, target, StandardCopyOption.REPLACE_EXISTING);
                        }
                    }
                }
            }

            """
        FileManager.default.createFile(atPath: folder + "/StreamExtract.java", contents: Data(source.utf8))
        // Compiled into a new folder and renamed, so a concurrent run never loads a half-written class.
        let building = "classes-\(getpid())"
        let built = run("javac", ["-d", building, "StreamExtract.java"], in: folder)
        guard built.status == 0 else { return .failure(ExtractorBuildFailure(output: "javac failed: \(built.output)")) }
        if rename(folder + "/" + building, folder + "/classes") != 0 {
            try? FileManager.default.removeItem(atPath: folder + "/" + building)
        }
        return .success(folder + "/classes")
    }()

    /// Why an extractor (Go's, Java's) could not be built.
    struct ExtractorBuildFailure: Error { let output: String }

    /// A small extractor built once with Go's archive/zip (every file by its name, as Go reads it), or why
    /// `go build` failed: a failure is reported by every extraction, never a reader silently dropped.
    static let goExtractor: Result<String, ExtractorBuildFailure> = {
        // One fixed folder, reused by later runs (the source is fixed too), so no run leaves a folder behind.
        let folder = NSTemporaryDirectory() + "/hcpack-goextract-v1-\(getuid())"
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let source = """
            package main

            import (
            \t"archive/zip"
            \t"io"
            \t"os"
            \t"path/filepath"
            \t"strings"
            )

            func main() {
            \tr, err := zip.OpenReader(os.Args[1])
            \tif err != nil {
            \t\tpanic(err)
            \t}
            \tfor _, f := range r.File {
            \t\ttarget := filepath.Join(os.Args[2], f.Name)
            \t\tif strings.HasSuffix(f.Name, "/") {
            \t\t\tos.MkdirAll(target, 0o755)
            \t\t\tcontinue
            \t\t}
            \t\tos.MkdirAll(filepath.Dir(target), 0o755)
            \t\tin, err := f.Open()
            \t\tif err != nil {
            \t\t\tpanic(err)
            \t\t}
            \t\tout, err := os.Create(target)
            \t\tif err != nil {
            \t\t\tpanic(err)
            \t\t}
            \t\tif _, err := io.Copy(out, in); err != nil {
            \t\t\tpanic(err)
            \t\t}
            \t\tout.Close()
            \t\tin.Close()
            \t}
            }

            """
        FileManager.default.createFile(atPath: folder + "/main.go", contents: Data(source.utf8))
        let binary = folder + "/goextract"
        // Built into a new name and renamed, so a concurrent run never executes a half-written binary.
        let building = binary + "-\(getpid())"
        let built = run("go", ["build", "-o", building, "main.go"], in: folder)
        guard built.status == 0 else { return .failure(ExtractorBuildFailure(output: "go build failed: \(built.output)")) }
        guard rename(building, binary) == 0 else { return .failure(ExtractorBuildFailure(output: "rename to \(binary) failed")) }
        return .success(binary)
    }()
}

/// Installs `archive` and unpacks it with every reader; returns each disagreement (empty when they all agree)
/// and how many files install placed.
/// Install places Contents/ at DEST; the readers write the whole archive, so their Contents/ (under the
/// package's root folder, if any) is compared with DEST, and their whole trees with each other.
func readerDisagreements(_ archive: String, in folder: TemporaryFolder, readers: [ZipReader] = ZipReader.withoutGo)
    -> (disagreements: [String], placed: Int)
{
    var found: [String] = []
    let dest = folder.url("interop-dest")
    folder.makeFolder("interop-dest")
    let installed = hcpack(["install", archive, "--dest", dest])
    guard installed.status == 0 else { return (["install failed: \(installed.stdout)\(installed.stderr)"], 0) }
    let placed = filesUnder(dest).filter { !$0.key.hasPrefix(".hcpack/") && $0.key != ".hcpack" }
    var trees: [(ZipReader, [String: [UInt8]])] = []
    for reader in readers {
        let out = folder.url("interop-\(reader.rawValue)")
        folder.makeFolder("interop-\(reader.rawValue)")
        let (ok, output) = reader.extract(archive, into: out)
        if !ok { found.append("\(reader) failed: \(output)") }
        trees.append((reader, filesUnder(out)))
    }
    for (reader, tree) in trees {
        // The package root: the archive root, or the single folder holding ContentInfo.plist.
        let plist = tree.keys.filter { $0 == "ContentInfo.plist" || $0.hasSuffix("/ContentInfo.plist") }.sorted {
            $0.count < $1.count
        }.first
        let prefix = (plist.map { String($0.dropLast("ContentInfo.plist".count)) } ?? "") + "Contents/"
        let contents = Dictionary(
            uniqueKeysWithValues: tree.filter { $0.key.hasPrefix(prefix) }.map {
                (String($0.key.dropFirst(prefix.count)), $0.value)
            })
        if contents.keys.sorted() != placed.keys.sorted() {
            found.append("\(reader) unpacked \(contents.keys.sorted()), install placed \(placed.keys.sorted())")
        } else {
            for (path, bytes) in placed where contents[path] != bytes {
                found.append("\(reader): \(path) has other bytes than install placed")
            }
        }
        if let first = trees.first, first.1 != tree { found.append("\(reader) and \(first.0) unpacked different trees") }
    }
    for name in ["interop-dest"] + readers.map({ "interop-\($0.rawValue)" }) { folder.remove(name) }
    return (found, placed.count)
}

/// A source folder with what trips readers up: UTF-8 and Japanese names, empty files, nested folders,
/// compressible and incompressible data.
func writeInteropSource(_ folder: TemporaryFolder, at root: String) {
    let files: [(String, [UInt8])] = [
        ("index.json", Array("{\"title\": \"Levels\"}\n".utf8)),
        ("art/Café.txt", Array("non-ASCII name\n".utf8)),
        ("art/naïve résumé.txt", Array("spaces and accents\n".utf8)),
        ("日本語/ファイル.txt", Array("日本語のテキスト\n".utf8)),
        ("日本語/空/empty.txt", []),
        ("empty.bin", []),
        ("a/b/c/d/e/deep.json", Array("{\"deep\": true}\n".utf8)),
        ("data/repeated.txt", Array(String(repeating: "hosted content ", count: 20_000).utf8)),
        ("data/noise.bin", (0..<150_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }),
    ]
    for (path, bytes) in files { folder.write(root + "/Contents/" + path, bytes) }
    folder.write(
        root + "/ContentInfo.plist",
        plistXML(
            "<key>IAPProductIdentifier</key><string>com.example.interop</string><key>ContentVersion</key><string>2.0</string>"))
}

/// `hcpack build` options to try: every compression policy, timestamps, a plain folder, exclusions.
let interopBuilds: [(name: String, arguments: [String])] = [
    ("default", []),
    ("store", ["--compression", "store"]),
    ("deflate", ["--compression", "deflate"]),
    ("auto", ["--compression", "auto"]),
    ("epoch 0", ["--source-date-epoch", "0"]),
    ("epoch 2030", ["--source-date-epoch", "1900000000", "--compression", "deflate"]),
    ("exclude", ["--exclude", "*.bin"]),
    ("plain folder", ["--product-id", "com.example.plain", "--content-version", "3.1"]),
]

@Suite("zip interop: what verify approves, every reader unpacks as install does")
struct ZipInteropTests {
    /// Builds the interop source with the options named `name` into `folder/name.zip`, checked by verify.
    static func builtPackage(_ name: String, in folder: TemporaryFolder) throws -> String {
        let arguments = try #require(interopBuilds.first { $0.name == name }?.arguments)
        writeInteropSource(folder, at: "pkg-\(name)")
        var source = folder.url("pkg-\(name)")
        if name == "plain folder" {
            folder.remove("pkg-\(name)/ContentInfo.plist")
            source = folder.url("pkg-\(name)/Contents")
        }
        let archive = folder.url("\(name).zip")
        let built = hcpack(["build", source, "-o", archive] + arguments)
        try #require(built.status == 0, "\(built.stdout)\(built.stderr)")
        let verified = hcpack(["verify", archive, "--strict"])
        #expect(verified.status == 0, "\(verified.stdout)")
        return archive
    }

    @Test(
        "Packages hcpack build makes unpack the same in unzip, zipfile, miniunzip and Java's ZipInputStream as with hcpack install",
        arguments: interopBuilds.map(\.name))
    func builtPackages(_ name: String) throws {
        let folder = TemporaryFolder()
        let archive = try Self.builtPackage(name, in: folder)
        // Java's ZipInputStream refused every stored entry while hcpack gave them data descriptors (bit 3).
        let (disagreements, placed) = readerDisagreements(archive, in: folder, readers: ZipReader.withoutGo + [.java])
        #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
        // Not vacuous: install placed every source file (but the excluded ones).
        #expect(placed == (name == "exclude" ? 7 : 9))
    }

    @Test(
        "Go's archive/zip unpacks every package hcpack build makes, and every zip fixture verify approves, as install places them",
        .enabled(if: Requirement.go.enabled, Requirement.go.comment))
    func goReader() throws {
        try Requirement.go.require()
        let folder = TemporaryFolder()
        for name in interopBuilds.map(\.name) {
            let archive = try Self.builtPackage(name, in: folder)
            let (disagreements, placed) = readerDisagreements(archive, in: folder, readers: [.go])
            #expect(disagreements.isEmpty, "\(name): \(disagreements.joined(separator: "\n"))")
            #expect(placed == (name == "exclude" ? 7 : 9), "\(name)")
        }
        let approved = try Self.zipFixtures(in: folder).filter { hcpack(["verify", $0.path]).status == 0 }
        #expect(approved.count == 4, "\(approved.map(\.name))")
        for (name, path) in approved {
            let (disagreements, placed) = readerDisagreements(path, in: folder, readers: [.go])
            #expect(disagreements.isEmpty, "\(name): \(disagreements.joined(separator: "\n"))")
            #expect(placed > 0, "\(name)")
        }
    }

    @Test("What the rules guard against is real: readers unpack the refused shapes differently")
    func refusedShapesDiffer() throws {
        let folder = TemporaryFolder()
        // No UTF-8 flag: zipfile decodes the name as CP437, minizip writes its bytes.
        let unflagged = RawZip.package([RawZipEntry("Contents/世界.json", "{}")], listing: ["a.json", "世界.json"]).write(
            to: folder.url("u.zip"))
        #expect(hcpack(["verify", unflagged]).stdout.contains("[zip.unportable-name]"))
        let (zipfileTree, miniTree) = (folder.url("zf"), folder.url("mz"))
        folder.makeFolder("zf")
        folder.makeFolder("mz")
        let zipfileRan = ZipReader.zipfile.extract(unflagged, into: zipfileTree)
        let miniRan = ZipReader.miniunzip.extract(unflagged, into: miniTree)
        try #require(zipfileRan.ok, "\(zipfileRan.output)")
        try #require(miniRan.ok, "\(miniRan.output)")
        // Both wrote every entry; zipfile wrote this one under another name (its CP437 reading of the bytes).
        #expect(filesUnder(zipfileTree).count == 3 && filesUnder(miniTree).count == 3, "\(filesUnder(zipfileTree).keys.sorted())")
        #expect(filesUnder(zipfileTree)["Contents/世界.json"] == nil)
        #expect(filesUnder(miniTree)["Contents/世界.json"] != nil)
        // Central and local names differ: the readers take the central one.
        var renamed = RawZip.package([RawZipEntry("Contents/b.json", "{}")], listing: ["a.json", "b.json"])
        renamed.entries[2].localName = Array("Contents/c.json".utf8)
        let masterKey = renamed.write(to: folder.url("m.zip"))
        #expect(hcpack(["verify", masterKey]).stdout.contains("[zip.header-mismatch]"))
        folder.makeFolder("mk")
        // unzip ran, saw the two names and warned (exit 1), taking the central one.
        let unzipRan = ZipReader.unzip.extract(masterKey, into: folder.url("mk"))
        #expect(unzipRan.output.contains("continuing with \"central\" filename"), "\(unzipRan.output)")
        #expect(filesUnder(folder.url("mk"))["Contents/b.json"] == Array("{}".utf8))
    }

    /// Every zip fixture of the suite: four well-formed ones, the zip rule cases and the hostile zips, each
    /// checked to exist (a fixture whose maker failed fails the test, it is not dropped).
    static func zipFixtures(in folder: TemporaryFolder) throws -> [(name: String, path: String)] {
        var fixtures: [(name: String, path: String)] = []
        fixtures.append(("raw writer", RawZip.package([]).write(to: folder.url("raw.zip"))))
        fixtures.append(("PackageArchive", PackageArchive(format: .zip).write(to: folder.url("pa.zip"))))
        writeValidPackage(in: folder, root: "pkg")
        zipFolder(folder.url("pkg"), to: folder.url("zf.zip"))
        fixtures.append(("zipFolder", folder.url("zf.zip")))
        let bsdtar = run("env", ["LC_ALL=C.UTF-8", "bsdtar", "--format", "zip", "-cf", folder.url("bsd.zip"), "."], in: folder.url("pkg"))
        try #require(bsdtar.status == 0, "\(bsdtar.output)")
        fixtures.append(("bsdtar", folder.url("bsd.zip")))
        for (index, zipCase) in zipRuleCases.enumerated() {
            let path = folder.url("rule-\(index).zip")
            zipCase.make(path)
            try #require(FileManager.default.fileExists(atPath: path), "\(zipCase.name): no archive written")
            fixtures.append((zipCase.name, path))
        }
        for hostile in hostileArchives where hostile.file.hasSuffix(".zip") {
            let made = python(hostile.program, in: folder.path)
            try #require(made.status == 0, "\(hostile.name): fixture script failed: \(made.output)")
            let path = folder.url("hostile-\(fixtures.count).zip")
            try FileManager.default.moveItem(atPath: folder.url(hostile.file), toPath: path)
            fixtures.append((hostile.name, path))
        }
        return fixtures
    }

    @Test("Zip fixtures that verify approves unpack in unzip, zipfile and miniunzip as install places them")
    func approvedFixtures() throws {
        let folder = TemporaryFolder()
        var approved = 0
        for (name, path) in try Self.zipFixtures(in: folder) where hcpack(["verify", path]).status == 0 {
            approved += 1
            let (disagreements, placed) = readerDisagreements(path, in: folder)
            #expect(disagreements.isEmpty, "\(name): \(disagreements.joined(separator: "\n"))")
            #expect(placed > 0, "\(name)")
        }
        #expect(approved == 4, "the four well-formed fixtures, and none of the refused ones")
    }
}
