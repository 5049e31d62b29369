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

/// Rewrites the delta `input`'s ContentInfo.plist with `edit` (Python, on the plist as a dict `p`, with
/// `full`, NEW's plist), every other entry copied as it was.
func editDeltaPlist(_ input: String, new full: String, to output: String, _ edit: String, in folder: TemporaryFolder) {
    let script = """
        import sys, zipfile, plistlib
        src, full, out = sys.argv[1:4]
        z = zipfile.ZipFile(src)
        p = plistlib.loads(z.read('ContentInfo.plist'))
        full = plistlib.loads(zipfile.ZipFile(full).read('ContentInfo.plist'))
        \(edit)
        with zipfile.ZipFile(out, 'w') as o:
            for i in z.infolist():
                o.writestr(i, plistlib.dumps(p) if i.filename == 'ContentInfo.plist' else z.read(i))
        """
    let result = python(script, arguments: [input, full, output], in: folder.path)
    #expect(result.status == 0, "\(result.output)")
}

@Suite("A delta records only the files it changes; install holds the rest to a digest of NEW's records")
struct DeltaUnchangedDigestTests {
    @Test("The delta records what it carries; UnchangedSHA256 is the documented digest of NEW's other records, computed by Python")
    func recordsOnlyWhatChanges() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        // docs/format.md's formula, over NEW's records of the files the delta leaves in place.
        let script = """
            import sys, zipfile, plistlib, hashlib
            d = plistlib.loads(zipfile.ZipFile(sys.argv[1]).read('ContentInfo.plist'))
            n = plistlib.loads(zipfile.ZipFile(sys.argv[2]).read('ContentInfo.plist'))['HCPackIntegrity']
            left = {k: v for k, v in n.items() if k not in d['HCPackIntegrity']}
            digest = hashlib.sha256(b"".join(b"%s\\0%d\\0%s\\n" % (p.encode(), r["Size"], r["SHA256"].encode())
                for p, r in sorted(left.items(), key=lambda kv: kv[0].encode()))).hexdigest()
            print(sorted(d['HCPackIntegrity']), sorted(left))
            print(digest == d['HCPackDeltaBase']['UnchangedSHA256'], all(d['HCPackIntegrity'][k] == n[k] for k in d['HCPackIntegrity']))
            """
        let checked = python(script, arguments: [patch, v2], in: corpus.folder.path)
        #expect(checked.status == 0, "\(checked.output)")
        #expect(
            checked.output
                == "['levels/1.json', 'levels/3.json', 'new/dir/added.txt'] ['art/Café.txt', 'index.json', 'levels/2.json']\nTrue True\n")
        #expect(hcpack(["verify", patch]).status == 0)

        // Installed through the delta, DEST holds what a full install holds, receipt included.
        let viaDelta = corpus.dest("via-delta"), full = corpus.dest("full")
        #expect(hcpack(["install", v1, "--dest", viaDelta]).status == 0)
        #expect(hcpack(["install", patch, "--dest", viaDelta]).status == 0)
        #expect(hcpack(["install", v2, "--dest", full]).status == 0)
        #expect(regularFiles(viaDelta) == regularFiles(full))
        #expect(corpus.receipt(viaDelta) == corpus.receipt(full))
    }

    @Test("A receipt that does not hold NEW's records of the files left in place refuses the delta; DEST untouched")
    func receiptHeldToDigest() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        let receiptPath = ".hcpack/receipts/com.example.levels.json"

        func refused(_ name: String, mentioning text: String, editing edit: String) {
            let dest = corpus.dest(name)
            #expect(hcpack(["install", v1, "--dest", dest]).status == 0)
            let receipt = corpus.folder.url("\(name)/\(receiptPath)")
            let edited = python(
                "import json, sys\nr = json.load(open(sys.argv[1]))\n\(edit)\njson.dump(r, open(sys.argv[1], 'w'), indent=2)",
                arguments: [receipt], in: corpus.folder.path)
            #expect(edited.status == 0, "\(edited.output)")
            let before = treeListing(dest)
            let result = hcpack(["install", patch, "--dest", dest])
            #expect(result.status == 1, "\(result.stderr)")
            #expect(result.stderr.contains(text) && result.stderr.contains("install the full archive"), "\(result.stderr)")
            #expect(treeListing(dest) == before)
        }
        // index.json's recorded digest changed: DEST's file matches neither it nor the receipt.
        refused(
            "tampered", mentioning: "UnchangedSHA256 differs",
            editing: "[f.update(sha256='0' * 64) for f in r['files'] if f['path'] == 'index.json']")
        // A record of another size: the receipt no longer holds the base's records.
        refused(
            "resized", mentioning: "UnchangedSHA256 differs",
            editing: "[f.update(size=f['size'] + 1) for f in r['files'] if f['path'] == 'levels/2.json']")
        refused(
            "missing", mentioning: "does not record a file that",
            editing: "r['files'] = [f for f in r['files'] if f['path'] != 'art/Café.txt']")
    }

    @Test("A delta that records every listed file, without UnchangedSHA256 (as hcpack made them before), verifies and installs as before")
    func everyRecordFormat() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        let older = corpus.folder.url("older.zip")
        editDeltaPlist(
            patch, new: v2, to: older,
            "del p['HCPackDeltaBase']['UnchangedSHA256']\np['HCPackIntegrity'] = full['HCPackIntegrity']", in: corpus.folder)
        #expect(hcpack(["verify", older]).status == 0)
        let viaOlder = corpus.dest("via-older"), full = corpus.dest("full")
        #expect(hcpack(["install", v1, "--dest", viaOlder]).status == 0)
        let applied = hcpack(["install", older, "--dest", viaOlder])
        #expect(applied.status == 0, "\(applied.stderr)")
        #expect(hcpack(["install", v2, "--dest", full]).status == 0)
        #expect(regularFiles(viaOlder) == regularFiles(full))

        // Without the digest and without the records, the files left in place cannot be checked.
        let bare = corpus.folder.url("bare.zip")
        editDeltaPlist(patch, new: v2, to: bare, "del p['HCPackDeltaBase']['UnchangedSHA256']", in: corpus.folder)
        let unrecorded = hcpack(["verify", bare])
        #expect(unrecorded.status == 1 && unrecorded.stdout.contains("[delta.missing-record] Contents/index.json"), "\(unrecorded.stdout)")

        let malformed = corpus.folder.url("malformed.zip")
        editDeltaPlist(patch, new: v2, to: malformed, "p['HCPackDeltaBase']['UnchangedSHA256'] = 'AB' * 32", in: corpus.folder)
        let refused = hcpack(["verify", malformed])
        #expect(refused.status == 1 && refused.stdout.contains("[delta.malformed]"), "\(refused.stdout)")

        // A carried file still needs its record.
        let carriedBare = corpus.folder.url("carried-bare.zip")
        editDeltaPlist(patch, new: v2, to: carriedBare, "del p['HCPackIntegrity']['levels/3.json']", in: corpus.folder)
        let carried = hcpack(["verify", carriedBare])
        #expect(carried.status == 1 && carried.stdout.contains("[integrity.missing-record] Contents/levels/3.json"), "\(carried.stdout)")
    }

    @Test("A delta's digest covers the files it leaves in place under a signature: editing it breaks the signature")
    func signedDigest() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let key = corpus.folder.url("k.key")
        #expect(hcpack(["keygen", "--name", "example.com/levels", "-o", key]).status == 0)
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch, "--sign-key", key]).status == 0)
        let signed = hcpack(["verify", patch, "--trusted-key", key + ".pub"])
        #expect(signed.status == 0, "\(signed.stdout)")
        #expect(!signed.stdout.contains("unsigned-file"))
        let edited = corpus.folder.url("e.zip")
        editDeltaPlist(patch, new: v2, to: edited, "p['HCPackDeltaBase']['UnchangedSHA256'] = '0' * 64", in: corpus.folder)
        try FileManager.default.copyItem(atPath: patch + ".hcsig", toPath: edited + ".hcsig")
        let dest = corpus.dest("d")
        #expect(hcpack(["install", v1, "--dest", dest]).status == 0)
        let before = treeListing(dest)
        let result = hcpack(["install", edited, "--dest", dest, "--trusted-key", key + ".pub"])
        #expect(result.status == 1 && result.stdout.contains("signature.mismatch"), "\(result.stdout)\(result.stderr)")
        #expect(treeListing(dest) == before)
    }

    @Test("diff takes what a delta leaves in place from its base or target; against anything else those files are not compared")
    func diffLeftInPlace() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        let same = try #require(jsonObject(hcpack(["diff", v2, patch, "--json"]).stdout))
        #expect((same["counts"] as? [String: Int]) == ["added": 0, "removed": 0, "changed": 0, "unchanged": 6])
        #expect((same["new"] as? [String: Any])?["notCompared"] as? [String] == [])

        // A 1.0 with index.json edited is not the base: index.json, art/Café.txt, levels/2.json are unknown.
        var edited = DeltaCorpus.v1
        edited[0].1 = "{\"title\": \"Other\"}\n"
        let other = corpus.build("other.zip", version: "1.0", files: edited)
        let result = hcpack(["diff", other, patch, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let diff = try #require(jsonObject(result.stdout))
        #expect((diff["new"] as? [String: Any])?["notCompared"] as? [String] == ["art/Café.txt", "index.json", "levels/2.json"])
        let named = ((diff["added"] as? [[String: Any]]) ?? []) + ((diff["removed"] as? [[String: Any]]) ?? [])
            + ((diff["changed"] as? [[String: Any]]) ?? []) + ((diff["unchanged"] as? [[String: Any]]) ?? [])
        #expect(named.compactMap { $0["path"] as? String }.sorted() == ["levels/1.json", "levels/3.json", "new/dir/added.txt", "old/gone.txt"])
        // NEW's added and changed files against the edited 1.0: levels/3.json and new/dir/added.txt added,
        // levels/1.json changed, old/gone.txt removed; the unknown files count on neither side.
        let bytes = { (files: [(String, String)], paths: [String]) in files.filter { paths.contains($0.0) }.map { $0.1.utf8.count }.reduce(0, +) }
        let expected = bytes(DeltaCorpus.v2, ["levels/1.json", "levels/3.json", "new/dir/added.txt"])
            - bytes(DeltaCorpus.v1, ["levels/1.json", "old/gone.txt"])
        #expect(diff["sizeDelta"] as? Int == expected)
        #expect(hcpack(["diff", other, patch]).stdout.contains("3 files it leaves in place not compared"))
    }
}

/// Found by a black-box review (2026-12-06): each failed before its fix.
@Suite("A delta's claims about the files it leaves in place are held to the rules of the version it makes")
struct DeltaLeftInPlaceReviewTests {
    /// Python that recomputes UnchangedSHA256 over NEW's records of the left-in-place files plus `extra`.
    static let rehash = """
        import hashlib
        def rehash(extra):
            left = {k: v for k, v in full['HCPackIntegrity'].items() if k not in p['HCPackIntegrity']}
            left.update(extra)
            p['HCPackDeltaBase']['UnchangedSHA256'] = hashlib.sha256(b"".join(
                b"%s\\0%d\\0%s\\n" % (k.encode(), r["Size"], r["SHA256"].encode())
                for k, r in sorted(left.items(), key=lambda kv: kv[0].encode()))).hexdigest()
        """

    /// Installs `base` into a new DEST, then expects installing `delta` over it to fail and leave DEST as it was.
    static func expectInstallRefused(_ delta: String, over base: String, _ corpus: DeltaCorpus) {
        let dest = corpus.dest("refused")
        #expect(hcpack(["install", base, "--dest", dest]).status == 0)
        let before = treeListing(dest)
        #expect(hcpack(["install", delta, "--dest", dest]).status == 1)
        #expect(treeListing(dest) == before)
    }

    @Test("A left-in-place path that no installed version can hold is refused by verify, as the full version would be")
    func leftInPlacePathRules() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        let long = String(repeating: "x", count: 300)
        for (name, path, rule) in [
            ("reserved", ".hcpack/receipts/com.example.levels.json", "content.reserved-name"),
            ("patches", ".hcpack-patches/notes.txt", "content.reserved-name"), ("long", long, "content.long-path"),
            ("junk", "._evil", "content.junk"),
        ] {
            let edited = corpus.folder.url("\(name).zip")
            editDeltaPlist(
                patch, new: v2, to: edited,
                Self.rehash + "\np['Files'].append('\(path)')\nrehash({'\(path)': full['HCPackIntegrity']['index.json']})", in: corpus.folder)
            let result = hcpack(["verify", edited])
            #expect(result.stdout.contains("[\(rule)] Contents/\(path)"), "\(name): \(result.stdout)")
            // Junk is a warning, as for an entry; the others are errors that sign and install refuse too.
            #expect(result.status == (rule == "content.junk" ? 0 : 1), "\(name): \(result.stdout)")
        }
    }

    @Test("A key HCPackDeltaBase does not define is delta.malformed, and install refuses the delta; DEST untouched")
    func unknownDeltaBaseKey() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        let edited = corpus.folder.url("e.zip")
        editDeltaPlist(patch, new: v2, to: edited, "p['HCPackDeltaBase']['MinimumClient'] = '2.0'", in: corpus.folder)
        let verified = hcpack(["verify", edited])
        #expect(verified.status == 1 && verified.stdout.contains("[delta.malformed]") && verified.stdout.contains("MinimumClient"), "\(verified.stdout)")
        #expect(!verified.stdout.contains("delta.missing-record"), "\(verified.stdout)")
        Self.expectInstallRefused(edited, over: v1, corpus)
    }

    @Test("With UnchangedSHA256, a record of a file the delta leaves in place is delta.malformed, signed or not")
    func recordOfLeftInPlaceFile() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        let edited = corpus.folder.url("e.zip")
        editDeltaPlist(
            patch, new: v2, to: edited, "p['HCPackIntegrity']['index.json'] = {'Size': 20, 'SHA256': '0' * 64}", in: corpus.folder)
        let verified = hcpack(["verify", edited])
        #expect(verified.status == 1 && verified.stdout.contains("[delta.malformed] Contents/index.json"), "\(verified.stdout)")
        let key = corpus.folder.url("k.key")
        #expect(hcpack(["keygen", "--name", "example.com/levels", "-o", key]).status == 0)
        #expect(hcpack(["sign", edited, "--key", key]).status == 1)
        Self.expectInstallRefused(edited, over: v1, corpus)
    }

    @Test("A package with files under Contents/.hcpack-patches/, where a delta keeps its patches, is not built")
    func patchesFolderReserved() throws {
        let corpus = DeltaCorpus()
        corpus.folder.write("src/Contents/.hcpack-patches/notes.txt", "notes\n")
        corpus.folder.write("src/Contents/a.txt", "a\n")
        let result = hcpack([
            "build", corpus.folder.url("src"), "-o", corpus.folder.url("o.zip"), "--product-id", "com.example.p", "--content-version", "1.0",
        ])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect((result.stdout + result.stderr).contains("[content.reserved-name] Contents/.hcpack-patches/notes.txt"), "\(result.stdout)\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: corpus.folder.url("o.zip")))
    }

    @Test("A receipt that lists one path twice is not a record hcpack wrote: the delta is refused, DEST untouched")
    func duplicateReceiptRecord() throws {
        let corpus = DeltaCorpus()
        let (v1, v2) = corpus.standard()
        let patch = corpus.folder.url("p.zip")
        #expect(hcpack(["delta", v1, v2, "-o", patch]).status == 0)
        let dest = corpus.dest("d")
        #expect(hcpack(["install", v1, "--dest", dest]).status == 0)
        let receipt = dest + "/.hcpack/receipts/com.example.levels.json"
        let edited = python(
            """
            import json, sys
            r = json.load(open(sys.argv[1]))
            r['files'].append(dict(next(f for f in r['files'] if f['path'] == 'index.json'), sha256='0' * 64))
            json.dump(r, open(sys.argv[1], 'w'), indent=2)
            """, arguments: [receipt], in: corpus.folder.path)
        #expect(edited.status == 0, "\(edited.output)")
        let before = treeListing(dest)
        let result = hcpack(["install", patch, "--dest", dest])
        #expect(result.status == 1 && result.stderr.contains("'index.json' twice"), "\(result.stderr)")
        #expect(treeListing(dest) == before)
    }
}
