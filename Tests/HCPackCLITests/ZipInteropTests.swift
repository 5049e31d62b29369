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
/// and the reference readers (Info-ZIP unzip, Python's zipfile, and Go's archive/zip where Go is installed).
enum ZipReader: String, CaseIterable, Sendable {
    case unzip, zipfile, miniunzip, go

    /// The readers this machine has: `make deps` installs unzip, minizip and python3; Go is optional.
    static let available: [ZipReader] = allCases.filter { $0 != .go || goExtractor != nil }

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
        case .go: result = Self.goExtractor.map { run($0, [archive, folder]) } ?? (127, "go is not installed")
        }
        return (result.status == 0, result.output)
    }

    /// A small extractor built once with Go's archive/zip (every file by its name, as Go reads it); nil without Go.
    static let goExtractor: String? = {
        guard run("go", ["version"]).status == 0 else { return nil }
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
        guard run("go", ["build", "-o", building, "main.go"], in: folder).status == 0, rename(building, binary) == 0 else {
            return nil
        }
        return binary
    }()
}

/// Installs `archive` and unpacks it with every reader; returns each disagreement (empty when they all agree)
/// and how many files install placed.
/// Install places Contents/ at DEST; the readers write the whole archive, so their Contents/ (under the
/// package's root folder, if any) is compared with DEST, and their whole trees with each other.
func readerDisagreements(_ archive: String, in folder: TemporaryFolder) -> (disagreements: [String], placed: Int) {
    var found: [String] = []
    let dest = folder.url("interop-dest")
    folder.makeFolder("interop-dest")
    let installed = hcpack(["install", archive, "--dest", dest])
    guard installed.status == 0 else { return (["install failed: \(installed.stdout)\(installed.stderr)"], 0) }
    let placed = filesUnder(dest).filter { !$0.key.hasPrefix(".hcpack/") && $0.key != ".hcpack" }
    var trees: [(ZipReader, [String: [UInt8]])] = []
    for reader in ZipReader.available {
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
    for name in ["interop-dest"] + ZipReader.available.map({ "interop-\($0.rawValue)" }) { folder.remove(name) }
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
    @Test(
        "Packages hcpack build makes unpack the same in unzip, zipfile, miniunzip (and Go) as with hcpack install",
        arguments: interopBuilds.map(\.name))
    func builtPackages(_ name: String) throws {
        let arguments = try #require(interopBuilds.first { $0.name == name }?.arguments)
        let folder = TemporaryFolder()
        writeInteropSource(folder, at: "pkg")
        var source = folder.url("pkg")
        if name == "plain folder" {
            folder.remove("pkg/ContentInfo.plist")
            source = folder.url("pkg/Contents")
        }
        let archive = folder.url("built.zip")
        let built = hcpack(["build", source, "-o", archive] + arguments)
        try #require(built.status == 0, "\(built.stdout)\(built.stderr)")
        let verified = hcpack(["verify", archive, "--strict"])
        #expect(verified.status == 0, "\(verified.stdout)")
        let (disagreements, placed) = readerDisagreements(archive, in: folder)
        #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
        // Not vacuous: install placed every source file (but the excluded ones).
        #expect(placed == (name == "exclude" ? 7 : 9))
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
        _ = ZipReader.zipfile.extract(unflagged, into: zipfileTree)
        _ = ZipReader.miniunzip.extract(unflagged, into: miniTree)
        #expect(filesUnder(zipfileTree)["Contents/世界.json"] == nil)
        #expect(filesUnder(miniTree)["Contents/世界.json"] != nil)
        // Central and local names differ: the readers take the central one.
        var renamed = RawZip.package([RawZipEntry("Contents/b.json", "{}")], listing: ["a.json", "b.json"])
        renamed.entries[2].localName = Array("Contents/c.json".utf8)
        let masterKey = renamed.write(to: folder.url("m.zip"))
        #expect(hcpack(["verify", masterKey]).stdout.contains("[zip.header-mismatch]"))
        folder.makeFolder("mk")
        _ = ZipReader.unzip.extract(masterKey, into: folder.url("mk"))
        #expect(filesUnder(folder.url("mk"))["Contents/b.json"] == Array("{}".utf8))
    }

    @Test("Zip fixtures that verify approves unpack in every reader as install places them")
    func approvedFixtures() throws {
        let folder = TemporaryFolder()
        var approved = 0
        var fixtures: [(String, String)] = []
        fixtures.append(("raw writer", RawZip.package([]).write(to: folder.url("raw.zip"))))
        fixtures.append(("PackageArchive", PackageArchive(format: .zip).write(to: folder.url("pa.zip"))))
        writeValidPackage(in: folder, root: "pkg")
        zipFolder(folder.url("pkg"), to: folder.url("zf.zip"))
        fixtures.append(("zipFolder", folder.url("zf.zip")))
        run("env", ["LC_ALL=C.UTF-8", "bsdtar", "--format", "zip", "-cf", folder.url("bsd.zip"), "."], in: folder.url("pkg"))
        fixtures.append(("bsdtar", folder.url("bsd.zip")))
        for (index, zipCase) in zipRuleCases.enumerated() {
            let path = folder.url("rule-\(index).zip")
            zipCase.make(path)
            fixtures.append((zipCase.name, path))
        }
        for hostile in hostileArchives where hostile.file.hasSuffix(".zip") {
            let made = python(hostile.program, in: folder.path)
            guard made.status == 0 else { continue }
            let path = folder.url("hostile-\(fixtures.count).zip")
            try? FileManager.default.moveItem(atPath: folder.url(hostile.file), toPath: path)
            fixtures.append((hostile.name, path))
        }
        for (name, path) in fixtures where hcpack(["verify", path]).status == 0 {
            approved += 1
            let (disagreements, placed) = readerDisagreements(path, in: folder)
            #expect(disagreements.isEmpty, "\(name): \(disagreements.joined(separator: "\n"))")
            #expect(placed > 0, "\(name)")
        }
        #expect(approved == 4, "the four well-formed fixtures, and none of the refused ones")
    }
}
