import Foundation
import TestSupport
import Testing

/// Two versions whose changed files travel as binary patches: a large binary asset with rewritten blocks and
/// an insertion, a JSON file with small edits (both patched), "re-encoded media" (new random bytes: whole)
/// and a small changed file (whole: a patch saves too little).
struct PatchCorpus {
    let folder = TemporaryFolder()
    let v1: String
    let v2: String
    let delta: String
    let made: (status: Int32, stdout: String, stderr: String)

    static func pseudoRandom(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed
        var bytes = [UInt8](repeating: 0, count: count)
        for index in bytes.indices {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            bytes[index] = UInt8(truncatingIfNeeded: state >> 33)
        }
        return bytes
    }

    static func json(_ count: Int, edited: Bool) -> String {
        (0..<count).map { "{\"id\": \($0), \"name\": \"entry \($0)\", \"score\": \(edited && $0 % 97 == 0 ? $0 * 3 : $0 * 7)}" }
            .joined(separator: ",\n")
    }

    init(assetSize: Int = 3 << 20) {
        let asset = Self.pseudoRandom(assetSize, seed: 7)
        var changed = asset
        for block in stride(from: 4096 * 5, to: assetSize, by: 4096 * 101) {
            changed.replaceSubrange(block..<block + 4096, with: Self.pseudoRandom(4096, seed: UInt64(block)))
        }
        changed.insert(contentsOf: Self.pseudoRandom(64 << 10, seed: 9), at: assetSize / 2)
        let folder = self.folder
        func source(_ name: String, version: String, files: [(String, [UInt8])]) -> String {
            for (path, bytes) in files { folder.write("\(name)/Contents/" + path, bytes) }
            folder.write(
                "\(name)/ContentInfo.plist",
                plistXML("<key>IAPProductIdentifier</key><string>com.example.assets</string><key>ContentVersion</key><string>\(version)</string>"))
            return folder.url(name)
        }
        let one = source(
            "src1", version: "1.0",
            files: [
                ("data/assets.pak", asset), ("data/levels.json", Array(Self.json(2000, edited: false).utf8)),
                ("media/intro.m4a", Self.pseudoRandom(200_000, seed: 11)), ("small.txt", Array("one\n".utf8)),
                ("same.txt", Array("unchanged\n".utf8)),
            ])
        let two = source(
            "src2", version: "1.1",
            files: [
                ("data/assets.pak", changed), ("data/levels.json", Array(Self.json(2000, edited: true).utf8)),
                ("media/intro.m4a", Self.pseudoRandom(200_000, seed: 12)), ("small.txt", Array("two\n".utf8)),
                ("same.txt", Array("unchanged\n".utf8)),
            ])
        v1 = folder.url("v1.zip")
        v2 = folder.url("v2.zip")
        delta = folder.url("v1-v2.zip")
        #expect(hcpack(["build", one, "-o", v1, "-q"]).status == 0)
        #expect(hcpack(["build", two, "-o", v2, "-q"]).status == 0)
        made = hcpack(["delta", v1, v2, "-o", delta, "--json"])
    }

    /// A new folder with version 1.0 installed.
    func installedV1(_ name: String) -> String {
        folder.makeFolder(name)
        let dest = folder.url(name)
        let result = hcpack(["install", v1, "--dest", dest])
        #expect(result.status == 0, "\(result.stderr)")
        return dest
    }

    /// The delta unpacked, edited by `edit` (the plist as a dictionary, the patches folder), and zipped again
    /// with Python's zipfile (the plist first, as hcpack writes it). `zero_frame(n, window_log)` writes a zstd
    /// frame of RLE blocks that makes n zero bytes from a few bytes per 128 KiB (a patch bomb).
    func tampered(_ name: String, edit: String) -> String {
        let output = folder.url(name)
        let script = """
            import sys, zipfile, plistlib, hashlib
            source, output = sys.argv[1], sys.argv[2]
            entries = {}
            with zipfile.ZipFile(source) as z:
                for info in z.infolist():
                    if not info.filename.endswith('/'):
                        entries[info.filename] = z.read(info.filename)
            plist = plistlib.loads(entries['ContentInfo.plist'])
            patches = plist['HCPackPatches']
            def patch_bytes(path):
                return entries['Contents/.hcpack-patches/' + path]
            def set_patch(path, data):
                entries['Contents/.hcpack-patches/' + path] = data
                patches[path]['PatchSize'] = len(data)
                patches[path]['PatchSHA256'] = hashlib.sha256(data).hexdigest()
            def zero_frame(n, window_log):
                out = b'\\x28\\xb5\\x2f\\xfd' + bytes([3 << 6, (window_log - 10) << 3]) + n.to_bytes(8, 'little')
                left = n
                while left:
                    size = min(128 << 10, left); left -= size
                    out += ((size << 3) | 2 | (left == 0)).to_bytes(3, 'little') + b'\\0'
                return out
            def make_zeros(path, n):
                set_patch(path, zero_frame(n, 31))
                patches[path]['WindowLog'] = 31
                digest, block = hashlib.sha256(), bytes(1 << 20)
                for offset in range(0, n, len(block)):
                    digest.update(block[:n - offset])
                plist['HCPackIntegrity'][path] = dict(Size=n, SHA256=digest.hexdigest())
            \(edit)
            entries['ContentInfo.plist'] = plistlib.dumps(plist)
            with zipfile.ZipFile(output, 'w') as z:
                z.writestr('ContentInfo.plist', entries.pop('ContentInfo.plist'))
                for name in sorted(entries):
                    z.writestr(name, entries[name])
            """
        let result = run("python3", ["-c", script, delta, output])
        #expect(result.status == 0, "\(result.output)")
        return output
    }
}

/// Installs `archive` into `dest` and expects the refusal with `rule`, DEST exactly as it was and nothing left behind.
func expectInstallRefused(_ archive: String, dest: String, rule: String, flags: [String] = []) {
    let before = treeListing(dest), files = regularFiles(dest)
    let result = hcpack(["install", archive, "--dest", dest] + flags)
    #expect(result.status == 1, "\(result.stderr)")
    #expect((result.stderr + result.stdout).contains("[\(rule)]"), "\(result.stdout)\(result.stderr)")
    #expect(treeListing(dest) == before && regularFiles(dest) == files)
    #expect(leftovers(dest).isEmpty)
}

@Suite("hcpack delta: binary patches")
struct DeltaPatchTests {
    @Test("Changed files travel as patches when smaller; the delta installs to exactly a full install of NEW")
    func roundTrip() throws {
        let corpus = PatchCorpus()
        #expect(corpus.made.status == 0, "\(corpus.made.stderr)")
        let summary = try #require(jsonObject(corpus.made.stdout))
        let patched = try #require(summary["patched"] as? [[String: Any]])
        #expect(patched.compactMap { $0["path"] as? String } == ["data/assets.pak", "data/levels.json"])
        for entry in patched {
            let size = try #require(entry["size"] as? Int), patchSize = try #require(entry["patchSize"] as? Int)
            #expect(patchSize * 4 < size, "\(entry)")
        }
        #expect((summary["files"] as? [String])?.sorted() == ["data/assets.pak", "data/levels.json", "media/intro.m4a", "small.txt"])

        let listing = Set(run("unzip", ["-Z1", corpus.delta]).output.split(separator: "\n").map(String.init))
        #expect(listing.contains("Contents/.hcpack-patches/data/assets.pak") && !listing.contains("Contents/data/assets.pak"))
        #expect(listing.contains("Contents/media/intro.m4a") && listing.contains("Contents/small.txt"))
        let deltaSize = try #require(try FileManager.default.attributesOfItem(atPath: corpus.delta)[.size] as? Int)
        let fullSize = try #require(try FileManager.default.attributesOfItem(atPath: corpus.v2)[.size] as? Int)
        #expect(deltaSize < 500_000 && fullSize > 3_000_000, "delta \(deltaSize), full \(fullSize)")

        // inspect and diff name the patched files and what each saves; the catalog marks the delta.
        let inspected = hcpack(["inspect", corpus.delta])
        #expect(inspected.stdout.contains("2 as patches") && inspected.stdout.contains("patched data/assets.pak: "), "\(inspected.stdout)")
        let inspectedJSON = try #require(jsonObject(hcpack(["inspect", corpus.delta, "--json"]).stdout)?["delta"] as? [String: Any])
        #expect((inspectedJSON["patched"] as? [[String: Any]])?.compactMap { $0["path"] as? String } == ["data/assets.pak", "data/levels.json"])
        #expect((inspectedJSON["fromBase"] as? [String]) == ["same.txt"])
        let diffed = hcpack(["diff", corpus.v1, corpus.delta])
        #expect(diffed.stdout.contains("changed  data/levels.json (") && diffed.stdout.contains("-byte patch, saves "), "\(diffed.stdout)")
        let catalog = corpus.folder.url("catalog.json")
        let listed = hcpack(["catalog", corpus.v2, corpus.delta, "--base-url", "https://cdn.example.com", "-o", catalog, "--serial", "1"])
        #expect(listed.status == 0, "\(listed.stderr)")
        let catalogText = String(decoding: corpus.folder.read("catalog.json") ?? [], as: UTF8.self)
        #expect(catalogText.contains("\"patches\" : true"), "\(catalogText)")

        let verified = hcpack(["verify", corpus.delta])
        #expect(verified.status == 0 && verified.stdout.contains("0 errors, 0 warnings"), "\(verified.stdout)")

        let viaDelta = corpus.installedV1("via-delta"), full = corpus.installedV1("full")
        let applied = hcpack(["install", corpus.delta, "--dest", viaDelta, "--json"])
        #expect(applied.status == 0, "\(applied.stderr)")
        #expect(jsonObject(applied.stdout)?["status"] as? String == "upgraded")
        #expect(hcpack(["install", corpus.v2, "--dest", full]).status == 0)
        #expect(regularFiles(viaDelta) == regularFiles(full))
        #expect(regularFiles(viaDelta).count == 5)
        let receipt = "/.hcpack/receipts/com.example.assets.json"
        #expect(FileManager.default.contents(atPath: viaDelta + receipt) == FileManager.default.contents(atPath: full + receipt))
        #expect(leftovers(viaDelta).isEmpty)
        // Again: already there.
        let again = hcpack(["install", corpus.delta, "--dest", viaDelta, "--json"])
        #expect(jsonObject(again.stdout)?["status"] as? String == "unchanged", "\(again.stderr)")
    }

    @Test("From archives delta reads only what the delta is made of: the same bytes as from folders; a damaged shared file is not read, a damaged changed one is refused")
    func readsWhatItCarries() throws {
        let corpus = PatchCorpus()
        #expect(corpus.made.status == 0, "\(corpus.made.stderr)")
        let folder = corpus.folder
        // The archives unpacked: read whole, NEW's changed files staged and patched from files. From the archives,
        // levels.json (100 KB) is patched in memory and assets.pak (3 MiB) from staged files.
        let unpack = "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])"
        #expect(run("python3", ["-c", unpack, corpus.v1, folder.url("f1")]).status == 0)
        #expect(run("python3", ["-c", unpack, corpus.v2, folder.url("f2")]).status == 0)
        let fromFolders = hcpack(["delta", folder.url("f1"), folder.url("f2"), "-o", folder.url("folders.zip")])
        #expect(fromFolders.status == 0, "\(fromFolders.stderr)")
        let sameFromFolders = folder.read("folders.zip") == folder.read("v1-v2.zip")
        #expect(sameFromFolders)

        // NEW again with one file's bytes replaced (same size, plist unchanged): verify refuses it either way.
        func damaged(_ name: String, file: String) -> String {
            let output = folder.url(name)
            let script = """
                import sys, zipfile
                source, output, target = sys.argv[1], sys.argv[2], 'Contents/' + sys.argv[3]
                with zipfile.ZipFile(source) as z, zipfile.ZipFile(output, 'w', zipfile.ZIP_DEFLATED) as out:
                    for info in z.infolist():
                        data = z.read(info)
                        if info.filename == target:
                            data = bytes([data[0] ^ 1]) + data[1:]
                        out.writestr(info, data)
                """
            #expect(run("python3", ["-c", script, corpus.v2, output, file]).status == 0)
            #expect(hcpack(["verify", output]).status == 1)
            return output
        }
        // A file both versions record alike: the delta does not carry it and does not read it; it is the same delta.
        let sharedDamaged = damaged("shared.zip", file: "same.txt")
        let fromShared = hcpack(["delta", corpus.v1, sharedDamaged, "-o", folder.url("shared-delta.zip")])
        #expect(fromShared.status == 0, "\(fromShared.stderr)")
        let sameFromShared = folder.read("shared-delta.zip") == folder.read("v1-v2.zip")
        #expect(sameFromShared)
        // A changed file, patched in memory or from a staged file, or carried whole: refused, nothing written.
        for file in ["data/levels.json", "data/assets.pak", "small.txt"] {
            let bad = damaged("bad.zip", file: file)
            let refused = hcpack(["delta", corpus.v1, bad, "-o", folder.url("refused.zip")])
            // The first error, with its rule and the entry it is about.
            #expect(
                refused.status == 1 && refused.stderr.contains("not a valid package: [integrity.digest-mismatch] Contents/\(file): "),
                "\(file): \(refused.stderr)")
            #expect(!FileManager.default.fileExists(atPath: folder.url("refused.zip")))
            try FileManager.default.removeItem(atPath: bad)
        }
        // OLD's copy of a changed file is its patch's base: damaged, the delta is refused too.
        let oldScript = """
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1]) as z, zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED) as out:
                for info in z.infolist():
                    data = z.read(info)
                    if info.filename == 'Contents/data/levels.json':
                        data = bytes([data[0] ^ 1]) + data[1:]
                    out.writestr(info, data)
            """
        #expect(run("python3", ["-c", oldScript, corpus.v1, folder.url("old-bad.zip")]).status == 0)
        let badBase = hcpack(["delta", folder.url("old-bad.zip"), corpus.v2, "-o", folder.url("refused.zip")])
        #expect(badBase.status == 1 && badBase.stderr.contains("(OLD) is not a valid package"), "\(badBase.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.url("refused.zip")))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).allSatisfy { !$0.hasPrefix(".") })
    }

    @Test("A DEST file that is not the patch's base refuses the install before anything is placed, naming it")
    func notTheBase() throws {
        let corpus = PatchCorpus(assetSize: 1100 << 10)
        #expect(corpus.made.status == 0, "\(corpus.made.stderr)")
        let dest = corpus.installedV1("edited")
        var bytes = try #require(corpus.folder.read("edited/data/levels.json"))
        bytes[10] ^= 1  // same size, other bytes
        corpus.folder.write("edited/data/levels.json", bytes)
        let before = treeListing(dest), files = regularFiles(dest)
        let result = hcpack(["install", corpus.delta, "--dest", dest])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("[delta.patch-base]") && result.stderr.contains("data/levels.json"), "\(result.stderr)")
        #expect(result.stderr.contains("install the full archive"))
        #expect(treeListing(dest) == before && regularFiles(dest) == files)
        // The full archive repairs it (--force: the edited file is not hcpack's any more).
        #expect(hcpack(["install", corpus.v2, "--dest", dest, "--force"]).status == 0)
    }

    /// Two versions of one 512 KiB asset of the same size (blocks rewritten, none inserted), built, with the
    /// delta between them at `delta.zip`: the asset travels as a patch.
    static func sameSizeCorpus() -> (folder: TemporaryFolder, asset: [UInt8], changed: [UInt8]) {
        let folder = TemporaryFolder()
        let asset = PatchCorpus.pseudoRandom(512 << 10, seed: 21)
        var changed = asset
        for block in stride(from: 4096 * 3, to: asset.count, by: 4096 * 17) {
            changed.replaceSubrange(block..<block + 4096, with: PatchCorpus.pseudoRandom(4096, seed: UInt64(block)))
        }
        for (name, version, bytes) in [("src1", "1.0", asset), ("src2", "1.1", changed)] {
            folder.write("\(name)/Contents/assets.pak", bytes)
            folder.write(
                "\(name)/ContentInfo.plist",
                plistXML("<key>IAPProductIdentifier</key><string>com.example.same</string><key>ContentVersion</key><string>\(version)</string>"))
            #expect(hcpack(["build", folder.url(name), "-o", folder.url("\(name).zip"), "-q"]).status == 0)
        }
        let made = hcpack(["delta", folder.url("src1.zip"), folder.url("src2.zip"), "-o", folder.url("delta.zip"), "--json"])
        #expect(made.status == 0 && made.stdout.contains("\"patched\""), "\(made.stderr)")
        return (folder, asset, changed)
    }

    @Test(
        "DEST's copy of a base of the same size is hashed beside the patching: the base installs; other bytes, or another size, refuse it untouched; the new file already there installs",
        arguments: ["base", "other bytes", "other size", "already new"])
    func baseCheckedBesidePatching(dest kind: String) throws {
        let (folder, asset, changed) = Self.sameSizeCorpus()
        folder.makeFolder("dest")
        folder.makeFolder("full")
        let dest = folder.url("dest")
        #expect(hcpack(["install", folder.url("src1.zip"), "--dest", dest]).status == 0)
        #expect(hcpack(["install", folder.url("src2.zip"), "--dest", folder.url("full")]).status == 0)
        switch kind {
        case "other bytes": folder.write("dest/assets.pak", PatchCorpus.pseudoRandom(asset.count, seed: 22))
        case "other size": folder.write("dest/assets.pak", asset + [0])
        case "already new": folder.write("dest/assets.pak", changed)
        default: break
        }
        let before = treeListing(dest), files = regularFiles(dest)
        let result = hcpack(["install", folder.url("delta.zip"), "--dest", dest])
        if kind == "other bytes" || kind == "other size" {
            #expect(result.status == 1, "\(result.stderr)")
            #expect(result.stderr.contains("[delta.patch-base]") && result.stderr.contains("assets.pak changed since it was installed"), "\(result.stderr)")
            #expect(treeListing(dest) == before && regularFiles(dest) == files && leftovers(dest).isEmpty)
        } else {
            #expect(result.status == 0, "\(result.stderr)")
            #expect(regularFiles(dest) == regularFiles(folder.url("full")))
            #expect(leftovers(dest).isEmpty, "\(leftovers(dest))")
        }
    }

    @Test(
        "Hostile patches are refused with their rule and DEST stays untouched",
        arguments: [
            // (edit of the unpacked delta, the rule, whether verify already refuses it)
            // Cut short, or with bytes after its frame: verify walks the block headers (review finding 4).
            ("set_patch('data/levels.json', patch_bytes('data/levels.json')[:-20])", "delta.patch-result", true),
            ("set_patch('data/levels.json', patch_bytes('data/levels.json') + bytes(5))", "delta.patch-result", true),
            ("set_patch('data/levels.json', patch_bytes('data/levels.json') * 2)", "delta.patch-result", true),
            // A flipped byte inside the compressed data: only decoding finds it (verify's verdict is not asserted:
            // the byte may fall on a block header, which verify does read).
            ("d = bytearray(patch_bytes('data/assets.pak')); d[len(d)//2] ^= 0xff; set_patch('data/assets.pak', bytes(d))", "delta.patch-result", nil),
            // The frame header declares another size than the record (verify reads it: issue 32 review).
            ("plist['HCPackIntegrity']['data/assets.pak']['Size'] += 1", "delta.patch-result", true),
            ("plist['HCPackIntegrity']['data/levels.json']['SHA256'] = '0' * 64", "delta.patch-result", false),
            ("set_patch('data/levels.json', patch_bytes('data/assets.pak'))", "delta.patch-result", true),
            // The frame declares a 2^27-byte window, over its record's WindowLog: the single-segment frame's header
            // rewritten with a window descriptor (it decodes to the same bytes with a wider window).
            ("d = bytearray(patch_bytes('data/levels.json')); assert d[4] & 0x20 and d[4] >> 6 == 2; d[4] &= 0xdf; d[5:5] = bytes([17 << 3]); set_patch('data/levels.json', bytes(d))", "delta.patch-result", true),
            // The frame names a dictionary (a one-byte dictionary ID after the descriptor); not a frame at all; a
            // patch shorter than a frame header.
            ("d = bytearray(patch_bytes('data/levels.json')); assert d[4] & 0x20 and d[4] & 3 == 0; d[4] |= 1; d[5:5] = bytes([7]); set_patch('data/levels.json', bytes(d))", "delta.patch-result", true),
            ("set_patch('data/levels.json', b'PK' * 3000)", "delta.patch-result", true),
            ("set_patch('data/levels.json', patch_bytes('data/levels.json')[:5])", "delta.patch-result", true),
            ("patches['data/levels.json']['PatchSHA256'] = '1' * 64", "delta.patch-mismatch", true),
            ("patches['data/levels.json']['WindowLog'] = 10", "delta.patch-malformed", true),
            ("patches['data/levels.json']['WindowLog'] = 40", "delta.patch-malformed", true),
            ("patches['missing.bin'] = dict(patches['data/levels.json'])", "delta.patch-malformed", true),
            ("del entries['Contents/.hcpack-patches/data/levels.json']", "delta.patch-mismatch", true),
            ("entries['Contents/.hcpack-patches/extra'] = b'x'", "delta.patch-mismatch", true),
        ])
    func hostile(edit: String, rule: String, verifyRefuses: Bool?) throws {
        let corpus = PatchCorpus(assetSize: 1100 << 10)
        #expect(corpus.made.status == 0, "\(corpus.made.stderr)")
        let hostile = corpus.tampered("hostile.zip", edit: edit)
        let verified = hcpack(["verify", hostile])
        if verifyRefuses == true {
            #expect(verified.status == 1 && verified.stdout.contains("[\(rule)]"), "\(verified.stdout)")
            // The same verdict for the delta unpacked into a folder (its files read by the folder scan).
            let unpacked = corpus.folder.url("unpacked")
            #expect(run("unzip", ["-q", hostile, "-d", unpacked]).status == 0)
            let folderVerified = hcpack(["verify", unpacked])
            #expect(folderVerified.status == 1 && folderVerified.stdout.contains("[\(rule)]"), "\(folderVerified.stdout)")
        } else if verifyRefuses == false {
            #expect(verified.status == 0, "\(verified.stdout)")
        }
        expectInstallRefused(hostile, dest: corpus.installedV1("dest"), rule: rule)
    }

    @Test(
        "A patch bomb (a zstd frame of zeros, its records edited to match) is refused by verify and install under the archive's limits",
        arguments: [
            // (flags, the rule): --max-bytes bounds one made file and the total; the default ratio (200) bounds 512 MiB
            // made from about 1.3 MB of patches and bases (the patches together: the asset's counts too).
            (["--max-bytes", "8000000", "--max-ratio", "2"], "archive.limit-exceeded"),
            ([], "archive.compression-ratio"),
            (["--max-size", "1000000", "--max-ratio", "10000"], "content.too-large"),
        ])
    func patchBomb(flags: [String], rule: String) throws {
        let corpus = PatchCorpus(assetSize: 1100 << 10)
        #expect(corpus.made.status == 0, "\(corpus.made.stderr)")
        let bomb = corpus.tampered("bomb.zip", edit: "make_zeros('data/levels.json', 512 << 20)")
        let bombSize = try #require(try FileManager.default.attributesOfItem(atPath: bomb)[.size] as? Int)
        #expect(bombSize < 300_000)
        let verified = hcpack(["verify", bomb] + flags)
        #expect(verified.status == 1 && verified.stdout.contains("[\(rule)]"), "\(verified.stdout)")
        expectInstallRefused(bomb, dest: corpus.installedV1("dest"), rule: rule, flags: flags)
    }

    @Test("Sizes near 2^63 in a delta's records end verify, inspect, install and diff with an answer, never a trap")
    func overflowingSizes() throws {
        let corpus = PatchCorpus(assetSize: 1100 << 10)
        #expect(corpus.made.status == 0, "\(corpus.made.stderr)")
        let binary = hcpackBinary()
        let base = corpus.tampered("base.zip", edit: "patches['data/levels.json']['BaseSize'] = 2**63 - 1")
        let made = corpus.tampered("made.zip", edit: "plist['HCPackIntegrity']['data/assets.pak']['Size'] = 2**63 - 2")
        // Each size valid alone; their sum is past 2^63.
        let summed = corpus.tampered("summed.zip", edit: "for r in plist['HCPackIntegrity'].values(): r['Size'] = 5 * 10**18")
        for (index, hostile) in [base, made].enumerated() {
            let verified = run(binary, ["verify", hostile])
            #expect(verified.status == 1 && verified.output.contains("[delta.patch-malformed]"), "\(verified.output)")
            let inspected = run(binary, ["inspect", hostile])
            #expect(inspected.status == 0 && inspected.output.contains("Verification: INVALID"), "\(inspected.output)")
            let dest = corpus.installedV1("dest-\(index)")
            let before = treeListing(dest)
            let installed = run(binary, ["install", hostile, "--dest", dest])
            #expect(installed.status == 1 && installed.output.contains("[delta.patch-malformed]"), "\(installed.output)")
            #expect(treeListing(dest) == before && leftovers(dest).isEmpty)
        }
        let diffed = run(binary, ["diff", corpus.v1, summed, "--json"])
        #expect(diffed.status == 0, "\(diffed.output)")
        #expect(run(binary, ["diff", summed, corpus.v1]).status == 0)
        #expect(run(binary, ["inspect", summed, "--json"]).status == 0)
    }

    @Test("delta keeps a patch only while install's ratio allows what the patches make; --no-patches carries every file whole")
    func ratioAndNoPatches() throws {
        let folder = TemporaryFolder()
        func package(_ name: String, version: String, zeros: Int) -> String {
            folder.write("\(name)/Contents/zeros.bin", [UInt8](repeating: 0, count: zeros))
            folder.write("\(name)/Contents/keep.txt", Array("same\n".utf8))
            folder.write(
                "\(name)/ContentInfo.plist",
                plistXML("<key>IAPProductIdentifier</key><string>com.example.zeros</string><key>ContentVersion</key><string>\(version)</string>"))
            let output = folder.url(name + ".zip")
            let built = hcpack(["build", folder.url(name), "-o", output, "--compression", "store", "-q"])
            #expect(built.status == 0, "\(built.stderr)")
            return output
        }
        // 20 MiB of zeros from a 4 KiB base: a patch of a few hundred bytes, a ratio in the thousands, past the
        // 16 MiB grace.
        let v1 = package("v1", version: "1.0", zeros: 4096), v2 = package("v2", version: "1.1", zeros: 20 << 20)
        func delta(_ name: String, _ flags: [String]) throws -> [String] {
            let output = folder.url(name)
            let made = hcpack(["delta", v1, v2, "-o", output, "--compression", "store", "--json"] + flags)
            #expect(made.status == 0, "\(made.stderr)")
            let summary = try #require(jsonObject(made.stdout))
            let verified = hcpack(["verify", output] + flags)
            #expect(verified.status == 0, "\(verified.stdout)")
            return try #require(summary["patched"] as? [[String: Any]]).compactMap { $0["path"] as? String }
        }
        #expect(try delta("whole.zip", []) == [])
        #expect(try delta("patched.zip", ["--max-ratio", "1000000"]) == ["zeros.bin"])
        // What the patch makes counts against --max-ratio at install as at delta.
        let dest = folder.url("dest")
        folder.makeFolder("dest")
        #expect(hcpack(["install", v1, "--dest", dest]).status == 0)
        let refused = hcpack(["install", folder.url("patched.zip"), "--dest", dest])
        #expect(refused.status == 1 && (refused.stdout + refused.stderr).contains("[archive.compression-ratio]"), "\(refused.stdout)")
        let installed = hcpack(["install", folder.url("patched.zip"), "--dest", dest, "--max-ratio", "1000000"])
        #expect(installed.status == 0, "\(installed.stderr)")
        #expect(folder.read("dest/zeros.bin")?.count == 20 << 20)
        // A small zero file stays patched at the default ratio (the grace covers it), unless --no-patches.
        let v3 = package("v3", version: "1.2", zeros: 200_000)
        for (flags, patched) in [([String](), ["zeros.bin"]), (["--no-patches"], [])] {
            let output = folder.url("small\(patched.count).zip")
            let made = hcpack(["delta", v1, v3, "-o", output, "--json"] + flags)
            #expect(made.status == 0, "\(made.stderr)")
            let summary = try #require(jsonObject(made.stdout))
            #expect(try #require(summary["patched"] as? [[String: Any]]).compactMap { $0["path"] as? String } == patched)
            let listing = run("unzip", ["-Z1", output]).output
            #expect(listing.contains("Contents/zeros.bin") == patched.isEmpty, "\(listing)")
            let target = folder.url("dest\(patched.count)")
            folder.makeFolder("dest\(patched.count)")
            #expect(hcpack(["install", v1, "--dest", target]).status == 0)
            #expect(hcpack(["install", output, "--dest", target]).status == 0)
            #expect(folder.read("dest\(patched.count)/zeros.bin") == [UInt8](repeating: 0, count: 200_000))
        }
    }
}

@Suite("hcpack install: faults and kills during a patched install", .serialized)
struct DeltaPatchFaultTests {
    @Test(
        "EIO, ENOSPC or SIGKILL at each reservation, sync, rename and link of an install through patches: DEST ends old or new, and a rerun completes it",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func faults() throws {
        try Requirement.strace.require()
        let corpus = PatchCorpus(assetSize: 1100 << 10)
        #expect(corpus.made.status == 0, "\(corpus.made.stderr)")
        let binary = hcpackBinary()
        let template = corpus.installedV1("template")
        let oldFiles = regularFiles(template)
        let reference = corpus.folder.url("reference")
        copyTree(template, to: reference)
        #expect(hcpack(["install", corpus.v2, "--dest", reference]).status == 0)
        let newFiles = regularFiles(reference)
        #expect(oldFiles != newFiles)

        let syscalls = ["fallocate", "msync", "fsync", "fdatasync", "syncfs", "renameat", "renameat2", "linkat", "unlinkat"]
        let traced = corpus.folder.url("traced")
        copyTree(template, to: traced)
        let counts = syscallCounts([binary, "install", corpus.delta, "--dest", traced], syscalls: syscalls, log: corpus.folder.url("trace.log"))
        #expect(regularFiles(traced) == newFiles)
        #expect((counts["fallocate"] ?? 0) >= 2 && (counts["syncfs"] ?? 0) >= 2, "\(counts)")

        var faults: [String] = []
        // The first calls (the patched files' reservations and syncs come first) and the last (the receipt's).
        for (syscall, count) in counts.sorted(by: { $0.key < $1.key }) {
            for when in Set([1, 2, 3, count - 1, count]).filter({ $0 >= 1 && $0 <= count }).sorted() {
                faults.append("\(syscall):error=\(syscall == "fallocate" ? "ENOSPC" : "EIO"):when=\(when)")
                faults.append("\(syscall):signal=KILL:when=\(when)")
            }
        }
        for (index, fault) in faults.enumerated() {
            let dest = corpus.folder.url("run-\(index)")
            copyTree(template, to: dest)
            let child = ChildInstall("/usr/bin/env", ["strace", "-f", "-o", "/dev/null", "-e", "inject=\(fault)", binary, "install", corpus.delta, "--dest", dest])
            try child.start()
            let outcome = child.finish()
            let files = regularFiles(dest)
            if outcome.killed {
                #expect(fault.contains("KILL"), "\(fault): hcpack crashed: \(outcome.stderr)")
                for (path, data) in files {
                    #expect(data == newFiles[path] || data == oldFiles[path], "\(fault): \(path) holds bytes of no version")
                }
                if !hasJournal(dest) { #expect(files == oldFiles || files == newFiles, "\(fault)") }
            } else if outcome.status == 0 {
                #expect(files == newFiles, "\(fault): exit 0 but DEST is not the new version")
            } else {
                #expect(outcome.status == 3, "\(fault): \(outcome.stderr)")
                #expect(leftovers(dest).isEmpty, "\(fault): \(leftovers(dest))")
                #expect(files == oldFiles || files == newFiles, "\(fault): \(outcome.stderr)")
            }
            let rerun = run(binary, ["install", corpus.delta, "--dest", dest])
            #expect(rerun.status == 0, "\(fault): rerun: \(rerun.output)")
            #expect(regularFiles(dest) == newFiles, "\(fault): the rerun did not end at the new version")
            try? FileManager.default.removeItem(atPath: dest)
        }
    }

    @Test(
        "DEST's copy written to while the patch is applied to it refuses the install as [delta.patch-base], naming it, the write kept: in bytes the patch copies (not blamed on the delta) and in bytes it does not (not lost)",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment),
        arguments: [("copied", 4096 * 5 + 7), ("not copied", 4096 * 3 + 7)])
    func baseWrittenWhilePatching(region: String, offset: Int) throws {
        try Requirement.strace.require()
        let (folder, _, _) = DeltaPatchTests.sameSizeCorpus()
        folder.makeFolder("dest")
        let dest = folder.url("dest")
        #expect(hcpack(["install", folder.url("src1.zip"), "--dest", dest]).status == 0)
        // Every fallocate (the reservation of the file made from the patch comes right after that file is
        // created in the staging folder) waits a second: the write below lands while the base is open.
        let child = ChildInstall(
            "/usr/bin/env",
            ["strace", "-f", "-o", "/dev/null", "-e", "inject=fallocate:delay_enter=1000000", hcpackBinary(), "install", folder.url("delta.zip"), "--dest", dest])
        try child.start()
        var made: String?
        for _ in 0..<1000 where made == nil {
            made = FileManager.default.enumerator(atPath: dest + "/.hcpack")?.allObjects.compactMap { $0 as? String }
                .first { $0.hasSuffix("Contents/assets.pak") && !$0.contains(".hcpack-patches") }
            if made == nil { usleep(10_000) }
        }
        #expect(made != nil, "the file made from the patch never appeared in the staging folder")
        let handle = try #require(FileHandle(forUpdatingAtPath: dest + "/assets.pak"))
        try handle.seek(toOffset: UInt64(offset))
        handle.write(Data("EDIT".utf8))
        try handle.close()
        let edited = regularFiles(dest)
        let outcome = child.finish()
        #expect(outcome.status == 1, "\(region): \(outcome.stderr)")
        #expect(
            outcome.stderr.contains("[delta.patch-base]") && outcome.stderr.contains("assets.pak changed while the delta was being installed"),
            "\(region): \(outcome.stderr)")
        #expect(regularFiles(dest) == edited, "\(region): DEST changed")
        #expect(leftovers(dest).isEmpty, "\(region): \(leftovers(dest))")
    }
}
