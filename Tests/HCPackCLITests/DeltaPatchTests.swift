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
    /// with Python's zipfile (the plist first, as hcpack writes it).
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

    @Test("A DEST file that is not the patch's base refuses the install before anything is placed, naming it")
    func notTheBase() throws {
        let corpus = PatchCorpus(assetSize: 256 << 10)
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

    @Test(
        "Hostile patches are refused with their rule and DEST stays untouched",
        arguments: [
            // (edit of the unpacked delta, the rule, whether verify already refuses it)
            ("set_patch('data/levels.json', patch_bytes('data/levels.json')[:-20])", "delta.patch-result", false),
            ("d = bytearray(patch_bytes('data/assets.pak')); d[len(d)//2] ^= 0xff; set_patch('data/assets.pak', bytes(d))", "delta.patch-result", false),
            ("plist['HCPackIntegrity']['data/assets.pak']['Size'] += 1", "delta.patch-result", false),
            ("plist['HCPackIntegrity']['data/levels.json']['SHA256'] = '0' * 64", "delta.patch-result", false),
            ("set_patch('data/levels.json', patch_bytes('data/assets.pak'))", "delta.patch-result", false),
            // The frame declares a 2^27-byte window, over its record's WindowLog: the single-segment frame's header
            // rewritten with a window descriptor (it decodes to the same bytes with a wider window).
            ("d = bytearray(patch_bytes('data/levels.json')); assert d[4] & 0x20 and d[4] >> 6 == 2; d[4] &= 0xdf; d[5:5] = bytes([17 << 3]); set_patch('data/levels.json', bytes(d))", "delta.patch-result", false),
            ("patches['data/levels.json']['PatchSHA256'] = '1' * 64", "delta.patch-mismatch", true),
            ("patches['data/levels.json']['WindowLog'] = 10", "delta.patch-malformed", true),
            ("patches['data/levels.json']['WindowLog'] = 40", "delta.patch-malformed", true),
            ("patches['missing.bin'] = dict(patches['data/levels.json'])", "delta.patch-malformed", true),
            ("del entries['Contents/.hcpack-patches/data/levels.json']", "delta.patch-mismatch", true),
            ("entries['Contents/.hcpack-patches/extra'] = b'x'", "delta.patch-mismatch", true),
        ])
    func hostile(edit: String, rule: String, verifyRefuses: Bool) throws {
        let corpus = PatchCorpus(assetSize: 256 << 10)
        #expect(corpus.made.status == 0, "\(corpus.made.stderr)")
        let hostile = corpus.tampered("hostile.zip", edit: edit)
        let verified = hcpack(["verify", hostile])
        if verifyRefuses {
            #expect(verified.status == 1 && verified.stdout.contains("[\(rule)]"), "\(verified.stdout)")
        } else {
            #expect(verified.status == 0, "\(verified.stdout)")
        }
        let dest = corpus.installedV1("dest")
        let before = treeListing(dest), files = regularFiles(dest)
        let result = hcpack(["install", hostile, "--dest", dest])
        #expect(result.status == 1, "\(result.stderr)")
        #expect((result.stderr + result.stdout).contains("[\(rule)]"), "\(result.stdout)\(result.stderr)")
        #expect(treeListing(dest) == before && regularFiles(dest) == files)
    }
}

@Suite("hcpack install: faults and kills during a patched install", .serialized)
struct DeltaPatchFaultTests {
    @Test(
        "EIO, ENOSPC or SIGKILL at each reservation, sync, rename and link of an install through patches: DEST ends old or new, and a rerun completes it",
        .enabled(if: Requirement.strace.enabled, Requirement.strace.comment))
    func faults() throws {
        try Requirement.strace.require()
        let corpus = PatchCorpus(assetSize: 256 << 10)
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
}
