import Foundation
import TestSupport
import Testing

/// Versions 1.0, 1.1 and 1.2 of one product, built with hcpack build: 1.1 changes, adds and removes files.
struct DeltaCorpus {
    let folder = TemporaryFolder()

    static let v1: [(String, String)] = [
        ("index.json", "{\"title\": \"Levels\"}\n"), ("levels/1.json", "{\"level\": 1}\n"),
        ("levels/2.json", "{\"level\": 2}\n"), ("art/Café.txt", "non-ASCII name\n"), ("old/gone.txt", "removed in 1.1\n"),
    ]
    static let v2: [(String, String)] = [
        ("index.json", "{\"title\": \"Levels\"}\n"), ("levels/1.json", "{\"level\": 1, \"hard\": true}\n"),
        ("levels/2.json", "{\"level\": 2}\n"), ("art/Café.txt", "non-ASCII name\n"), ("levels/3.json", "{\"level\": 3}\n"),
        ("new/dir/added.txt", "added in 1.1\n"),
    ]
    static let v3: [(String, String)] = v2 + [("levels/4.json", "{\"level\": 4}\n")]

    /// Builds `name` (a zip) from `files` at `version`.
    @discardableResult
    func build(_ name: String, version: String, files: [(String, String)], format: String = "zip") -> String {
        for (path, text) in files { folder.write("src-\(name)/Contents/" + path, text) }
        folder.write(
            "src-\(name)/ContentInfo.plist",
            plistXML(
                """
                <key>IAPProductIdentifier</key><string>com.example.levels</string>
                <key>ContentVersion</key><string>\(version)</string>
                """))
        let output = folder.url(name)
        let result = hcpack(["build", folder.url("src-\(name)"), "-o", output, "--format", format, "-q"])
        #expect(result.status == 0, "\(result.stderr)")
        return output
    }

    func standard() -> (v1: String, v2: String) {
        (build("l-1.0.zip", version: "1.0", files: Self.v1), build("l-1.1.zip", version: "1.1", files: Self.v2))
    }

    /// A new, empty destination folder.
    func dest(_ name: String) -> String {
        folder.makeFolder(name)
        return folder.url(name)
    }

    func receipt(_ dest: String) -> String {
        String(decoding: folder.read(String(dest.dropFirst(folder.path.count + 1)) + "/.hcpack/receipts/com.example.levels.json") ?? [], as: UTF8.self)
    }
}

@Suite("hcpack delta: making, verifying and installing delta packages")
struct DeltaCommandTests {
    @Test("A delta carries only new and changed files, installs on its base to exactly the tree and receipt of a full install")
    func roundTrip() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("l-1.0-1.1.zip")
        let made = hcpack(["delta", v1, v2, "-o", patch, "--json"])
        #expect(made.status == 0, "\(made.stderr)")
        let summary = try #require(jsonObject(made.stdout))
        #expect((summary["files"] as? [String])?.sorted() == ["levels/1.json", "levels/3.json", "new/dir/added.txt"])
        #expect(summary["removed"] as? [String] == ["old/gone.txt"])
        #expect(summary["unchanged"] as? Int == 3)

        let listing = run("unzip", ["-Z1", patch]).output.split(separator: "\n").map(String.init)
        #expect(listing.contains("Contents/levels/1.json") && !listing.contains("Contents/index.json"))

        let verified = hcpack(["verify", patch, "--json"])
        #expect(verified.status == 0, "\(verified.stdout)")
        let delta = try #require(jsonObject(verified.stdout)?["delta"] as? [String: Any])
        #expect(delta["baseVersion"] as? String == "1.0")
        #expect(delta["files"] as? Int == 3)
        let oldPlist = run("unzip", ["-p", v1, "ContentInfo.plist"]).output
        #expect(delta["basePlistSHA256"] as? String == sha256Hex(Array(oldPlist.utf8)))

        let viaDelta = corpus.dest("via-delta"), full = corpus.dest("full")
        #expect(hcpack(["install", v1, "--dest", viaDelta]).status == 0)
        let applied = hcpack(["install", patch, "--dest", viaDelta, "--json"])
        #expect(applied.status == 0, "\(applied.stderr)")
        let result = try #require(jsonObject(applied.stdout))
        #expect(result["status"] as? String == "upgraded")
        #expect(result["removed"] as? [String] == ["old/gone.txt"])
        #expect(hcpack(["install", v2, "--dest", full]).status == 0)
        #expect(regularFiles(viaDelta) == regularFiles(full))
        #expect(regularFiles(viaDelta).count == 6)
        #expect(corpus.receipt(viaDelta) == corpus.receipt(full))
        #expect(corpus.receipt(full).contains("\"plistSHA256\""))

        // The same version again: a no-op.
        let again = hcpack(["install", patch, "--dest", viaDelta, "--json"])
        #expect(again.status == 0 && jsonObject(again.stdout)?["status"] as? String == "unchanged", "\(again.stderr)")
        // And a next delta applies on top of a version installed through a delta.
        let v3 = corpus.build("l-1.2.zip", version: "1.2", files: DeltaCorpus.v3)
        let next = corpus.folder.url("l-1.1-1.2.zip")
        #expect(hcpack(["delta", v2, v3, "-o", next]).status == 0)
        #expect(hcpack(["install", next, "--dest", viaDelta]).status == 0)
        #expect(regularFiles(viaDelta)["levels/4.json"] == Data("{\"level\": 4}\n".utf8))
    }

    @Test("Java's ZipInputStream unpacks a delta, its stored files and patches included, as unzip does")
    func javaReadsDelta() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("l-1.0-1.1.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        // Not vacuous: the delta stores files, none with a data descriptor (bit 3), which Java refused.
        let stored = python(
            "import sys, zipfile\nfor i in zipfile.ZipFile(sys.argv[1]).infolist():\n    if i.compress_type == 0 and not i.is_dir(): print(i.flag_bits & 8)",
            arguments: [patch], in: corpus.folder.path)
        let flags = stored.output.split(separator: "\n")
        #expect(stored.status == 0 && !flags.isEmpty && flags.allSatisfy { $0 == "0" }, "\(stored.output)")
        for reader in [ZipReader.unzip, .java] {
            corpus.folder.makeFolder(reader.rawValue)
            let (ok, output) = reader.extract(patch, into: corpus.folder.url(reader.rawValue))
            #expect(ok, "\(reader): \(output)")
        }
        let unzipped = filesUnder(corpus.folder.url("unzip"))
        #expect(unzipped.keys.contains("Contents/levels/1.json"))
        #expect(filesUnder(corpus.folder.url("java")) == unzipped)
    }

    @Test("Two runs give the same bytes, from archives or folders, zip or tar.gz")
    func reproducible() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        for format in ["zip", "tar.gz"] {
            let a = corpus.folder.url("a.\(format)"), b = corpus.folder.url("b.\(format)")
            #expect(hcpack(["delta", v1, v2, "-o", a]).status == 0)
            #expect(hcpack(["delta", v1, v2, "-o", b]).status == 0)
            #expect(corpus.folder.read("a.\(format)") == corpus.folder.read("b.\(format)"))
        }
        // From the built folders of the same versions: the same delta (the plists are the built ones).
        let folderV1 = corpus.build("f1", version: "1.0", files: DeltaCorpus.v1, format: "dir")
        let folderV2 = corpus.build("f2", version: "1.1", files: DeltaCorpus.v2, format: "dir")
        let c = corpus.folder.url("c.zip")
        let fromFolders = hcpack(["delta", folderV1, folderV2, "-o", c])
        #expect(fromFolders.status == 0, "\(fromFolders.stderr)")
        #expect(corpus.folder.read("c.zip") == corpus.folder.read("a.zip"))
        // An existing output is refused without --force, and kept.
        #expect(hcpack(["delta", v1, v2, "-o", c]).status == 2)
        #expect(corpus.folder.read("c.zip") == corpus.folder.read("a.zip"))
    }

    @Test("A delta of identical versions, a downgrade, two products or an invalid input is refused; nothing is written")
    func refusedInputs() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let out = corpus.folder.url("out.zip")
        let same = hcpack(["delta", v1, v1, "-o", out])
        #expect(same.status == 1 && same.stderr.contains("not greater"), "\(same.stderr)")
        let down = hcpack(["delta", v2, v1, "-o", out])
        #expect(down.status == 1 && down.stderr.contains("not greater"))
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        let ofDelta = hcpack(["delta", v1, patch, "-o", out])
        #expect(ofDelta.status == 1 && ofDelta.stderr.contains("itself a delta"))
        corpus.folder.write("broken.zip", "not an archive")
        #expect(hcpack(["delta", v1, corpus.folder.url("broken.zip"), "-o", out]).status == 1)
        #expect(hcpack(["delta", v1, v2]).status == 2)
        #expect(!FileManager.default.fileExists(atPath: out))
        // An input as the output, by its name or through a symlink, even with --force: the input is kept.
        let before = FileManager.default.contents(atPath: v1)
        let overOld = hcpack(["delta", v1, v2, "-o", v1, "--force"])
        #expect(overOld.status == 2 && overOld.stderr.contains("(OLD); write the delta to another file"), "\(overOld.stderr)")
        try FileManager.default.createSymbolicLink(atPath: corpus.folder.url("link.zip"), withDestinationPath: v2)
        let overNew = hcpack(["delta", v1, v2, "-o", corpus.folder.url("link.zip"), "--force"])
        #expect(overNew.status == 2 && overNew.stderr.contains("(NEW)"), "\(overNew.stderr)")
        let unchanged = FileManager.default.contents(atPath: v1) == before && before != nil
        #expect(unchanged)
        try FileManager.default.removeItem(atPath: corpus.folder.url("link.zip"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: corpus.folder.path).allSatisfy { !$0.hasPrefix(".") })
    }

    @Test(
        "A failed sync of the output's folder, after the rename, says the delta was written and how to write it again",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func folderSyncFails() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let out = corpus.folder.url("out.zip")
        // The last fsync of a run is the output folder's: count them, then fail that one.
        let counted = run("/usr/bin/env", ["strace", "-f", "-c", "-e", "trace=fsync", "-o", corpus.folder.url("count.txt"), hcpackBinary(), "delta", v1, v2, "-o", out])
        #expect(counted.status == 0, "\(counted.output)")
        let table = String(decoding: corpus.folder.read("count.txt") ?? [], as: UTF8.self)
        let fsyncs = try #require(table.split(separator: "\n").first { $0.hasSuffix(" fsync") }.flatMap { line in
            line.split(separator: " ").dropFirst(3).first.flatMap { Int($0) }
        }, "\(table)")
        try FileManager.default.removeItem(atPath: out)
        let failed = run(
            "/usr/bin/env",
            ["strace", "-f", "-o", "/dev/null", "-e", "inject=fsync:error=EIO:when=\(fsyncs)", hcpackBinary(), "delta", v1, v2, "-o", out])
        #expect(failed.status == 3, "\(failed.output)")
        #expect(failed.output.contains("out.zip was written, but its folder could not be synced"), "\(failed.output)")
        #expect(hcpack(["verify", out]).status == 0)
        #expect(hcpack(["delta", v1, v2, "-o", out, "--force"]).status == 0)
    }

    @Test("Install refuses a delta on an empty DEST, another version, an edited or deleted carried-over file; DEST untouched")
    func refusedInstalls() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)

        func refused(_ dest: String, mentioning text: String) {
            let before = treeListing(dest)
            let result = hcpack(["install", patch, "--dest", dest])
            #expect(result.status == 1, "\(result.stderr)")
            #expect(result.stderr.contains(text) && result.stderr.contains("install the full archive"), "\(result.stderr)")
            #expect(treeListing(dest) == before)
        }
        refused(corpus.dest("empty"), mentioning: "does not have installed")

        let other = corpus.dest("other")
        let v09 = corpus.build("l-0.9.zip", version: "0.9", files: DeltaCorpus.v1)
        #expect(hcpack(["install", v09, "--dest", other]).status == 0)
        refused(other, mentioning: "updates version 1.0 only")

        let edited = corpus.dest("edited")
        #expect(hcpack(["install", v1, "--dest", edited]).status == 0)
        corpus.folder.write("edited/index.json", "{\"title\": \"Mine\"}\n")
        refused(edited, mentioning: "index.json changed since it was installed")

        let deleted = corpus.dest("deleted")
        #expect(hcpack(["install", v1, "--dest", deleted]).status == 0)
        corpus.folder.remove("deleted/levels/2.json")
        refused(deleted, mentioning: "levels/2.json is missing")
        // The full archive repairs it.
        #expect(hcpack(["install", v2, "--dest", deleted]).status == 0)

        // A receipt written before receipts recorded the plist's SHA-256: the base cannot be confirmed.
        let older = corpus.dest("older")
        #expect(hcpack(["install", v1, "--dest", older]).status == 0)
        let receiptPath = "older/.hcpack/receipts/com.example.levels.json"
        let stripped = corpus.receipt(older).split(separator: "\n").filter { !$0.contains("plistSHA256") }.joined(separator: "\n")
        corpus.folder.write(receiptPath, stripped + "\n")
        refused(older, mentioning: "does not record its ContentInfo.plist")
    }

    @Test("verify: a delta without integrity records, or with a malformed base, is invalid")
    func malformedDeltas() throws {
        let folder = TemporaryFolder()
        let base = "<key>HCPackDeltaBase</key><dict><key>ContentVersion</key><string>0.9</string><key>PlistSHA256</key><string>\(String(repeating: "a", count: 64))</string><key>TargetPlistSHA256</key><string>\(String(repeating: "b", count: 64))</string></dict>"
        writeValidPackage(in: folder, root: "norecords", extraKeys: base)
        folder.remove("norecords/Contents/index.json")
        let noRecords = hcpack(["verify", folder.url("norecords")])
        #expect(noRecords.status == 1 && noRecords.stdout.contains("[delta.missing-record]"), "\(noRecords.stdout)")
        #expect(!noRecords.stdout.contains("files.not-found"))

        writeValidPackage(in: folder, root: "newer", extraKeys: base.replacingOccurrences(of: "0.9", with: "2.0"))
        let newer = hcpack(["verify", folder.url("newer")])
        #expect(newer.status == 1 && newer.stdout.contains("[delta.malformed]"), "\(newer.stdout)")

        writeValidPackage(in: folder, root: "short", extraKeys: "<key>HCPackDeltaBase</key><dict><key>ContentVersion</key><string>0.9</string></dict>")
        let short = hcpack(["verify", folder.url("short")])
        #expect(short.status == 1 && short.stdout.contains("[delta.malformed]"))
    }

    @Test("A signed delta installs with --trusted-key; a delta signed by no trusted key is refused before DEST is touched")
    func signedDelta() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let key = corpus.folder.url("k.key")
        #expect(hcpack(["keygen", "--name", "example.com/levels", "-o", key]).status == 0)
        let other = corpus.folder.url("o.key")
        #expect(hcpack(["keygen", "--name", "example.com/other", "-o", other]).status == 0)
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch, "--sign-key", key]).status == 0)
        #expect(FileManager.default.fileExists(atPath: patch + ".hcsig"))
        let dest = corpus.dest("d")
        #expect(hcpack(["install", v1, "--dest", dest]).status == 0)
        let before = treeListing(dest)
        let untrusted = hcpack(["install", patch, "--dest", dest, "--trusted-key", other + ".pub"])
        #expect(untrusted.status == 1 && untrusted.stdout.contains("signature.untrusted"))
        #expect(treeListing(dest) == before)
        let trusted = hcpack(["install", patch, "--dest", dest, "--trusted-key", key + ".pub", "--json"])
        #expect(trusted.status == 0, "\(trusted.stderr)")
        #expect(corpus.receipt(dest).contains("example.com/levels"))
    }
}

/// Lower-case hex SHA-256 of `bytes`, with sha256sum.
func sha256Hex(_ bytes: [UInt8]) -> String {
    let folder = TemporaryFolder()
    let path = folder.write("bytes", bytes)
    return String(run("sha256sum", [path]).output.prefix(64))
}

@Suite("inspect and diff understand deltas")
struct DeltaInspectTests {
    @Test("inspect names a delta's base and the files it leaves to DEST; diff OLD PATCH equals diff OLD NEW")
    func inspectAndDiff() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        let inspected = hcpack(["inspect", patch, "--json"])
        #expect(inspected.status == 0)
        let delta = try #require(jsonObject(inspected.stdout)?["delta"] as? [String: Any])
        #expect(delta["baseVersion"] as? String == "1.0" && delta["carried"] as? Int == 3)
        #expect(delta["fromBase"] as? [String] == ["art/Café.txt", "index.json", "levels/2.json"])
        #expect(hcpack(["inspect", patch]).stdout.contains("Delta:        from version 1.0"))

        let viaDelta = try #require(jsonObject(hcpack(["diff", v1, patch, "--json"]).stdout))
        let viaFull = try #require(jsonObject(hcpack(["diff", v1, v2, "--json"]).stdout))
        for key in ["added", "removed", "changed", "unchanged", "counts", "sizeDelta"] {
            // Both present, so two missing values cannot compare equal.
            let fromDelta = try #require(viaDelta[key], "diff OLD PATCH has no \(key)")
            let fromFull = try #require(viaFull[key], "diff OLD NEW has no \(key)")
            let options: JSONSerialization.WritingOptions = [.sortedKeys, .fragmentsAllowed]
            #expect(
                try JSONSerialization.data(withJSONObject: fromDelta, options: options)
                    == JSONSerialization.data(withJSONObject: fromFull, options: options), "\(key)")
        }
        #expect((viaDelta["new"] as? [String: Any])?["deltaBaseVersion"] as? String == "1.0")
        #expect(hcpack(["diff", v1, patch]).stdout.contains("a delta from 1.0"))
    }
}
