import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Python that writes `bad.tar` with the entries `(name, data, mode)` and a plist listing `listed`.
func tarWithModes(_ entries: [(String, String, Int)], listed: [String]) -> String {
    let items = entries.map { "('\($0.0)', b'\($0.1)', 0o\(String($0.2, radix: 8)))" }.joined(separator: ", ")
    let files = listed.map { "'\($0)'" }.joined(separator: ", ")
    return """
        import io, plistlib, tarfile
        plist = plistlib.dumps({'IAPProductIdentifier': 'com.example.modes', 'ContentVersion': '1.0', 'Files': [\(files)]})
        with tarfile.open('bad.tar', 'w', format=tarfile.PAX_FORMAT) as t:
            for name, data, mode in [('ContentInfo.plist', plist, 0o644), \(items)]:
                i = tarfile.TarInfo(name); i.mode = mode
                if name.endswith('/'):
                    i.type = tarfile.DIRTYPE; t.addfile(i)
                else:
                    i.size = len(data); t.addfile(i, io.BytesIO(data))
        """
}

@Suite("hcpack install: hostile shapes that are not errors")
struct InstallHostileTests {
    @Test(
        "Sparse tar entries (GNU and pax maps) verify and install as their full bytes, holes as zeros", arguments: ["gnu", "pax"])
    func sparse(_ format: String) throws {
        let folder = TemporaryFolder()
        let made = python(
            """
            import hashlib, os, plistlib, subprocess
            os.makedirs('src/Contents')
            with open('src/Contents/holes.bin', 'wb') as f:
                f.write(b'head'); f.seek(1 << 20); f.write(b'middle'); f.seek(3 << 20); f.write(b'tail')
            data = open('src/Contents/holes.bin', 'rb').read()
            info = {'IAPProductIdentifier': 'com.example.sparse', 'ContentVersion': '1.0', 'Files': ['holes.bin'],
                    'HCPackIntegrity': {'holes.bin': {'Size': len(data), 'SHA256': hashlib.sha256(data).hexdigest()}}}
            open('src/ContentInfo.plist', 'wb').write(plistlib.dumps(info))
            subprocess.run(['tar', '--sparse', '--format=\(format)', '-cf', '../sparse.tar', 'ContentInfo.plist', 'Contents'], cwd='src', check=True)
            """, in: folder.path)
        try #require(made.status == 0, "\(made.output)")
        // The archive holds the map and the data blocks only, not the megabytes of holes.
        let archiveSize = try FileManager.default.attributesOfItem(atPath: folder.url("sparse.tar"))[.size] as? Int ?? 0
        #expect(archiveSize < 64 << 10, "\(archiveSize) bytes: not a sparse archive")
        let verified = hcpack(["verify", folder.url("sparse.tar")])
        #expect(verified.status == 0, "\(verified.stdout)")
        folder.makeFolder("dest")
        let result = hcpack(["install", folder.url("sparse.tar"), "--dest", folder.url("dest")])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(folder.read("dest/holes.bin") == folder.read("src/Contents/holes.bin"))
        #expect(folder.read("dest/holes.bin")?.count == (3 << 20) + 4)
    }

    @Test("A file 300 folders deep installs, reinstalls as a no-op, and its staging copy is removed")
    func deepFolders() throws {
        let folder = TemporaryFolder()
        let deep = String(repeating: "d/", count: 300) + "x.json"
        let archive = PackageArchive(format: .tar, files: [(deep, "{\"deep\": true}\n"), ("top.json", "{}\n")])
            .write(to: folder.url("deep.tar"))
        folder.makeFolder("dest")
        let first = hcpack(["install", archive, "--dest", folder.url("dest"), "--json"])
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        #expect(folder.read("dest/" + deep) == Array("{\"deep\": true}\n".utf8))
        // --wait: a process other tests spawn meanwhile holds a copy of the lock descriptor until its exec.
        let again = hcpack(["install", archive, "--dest", folder.url("dest"), "--json", "--wait"])
        #expect(jsonObject(again.stdout)?["status"] as? String == "unchanged", "\(again.stdout)\(again.stderr)")
        #expect(leftovers(folder.url("dest")).isEmpty)
    }

    // Its time is measured by `make bench` (bench/pathological.py), not here: a debug build beside other suites.
    @Test(
        "20,000 entries: install stays within 200 MB and removes every staged file it did not place",
        .timeLimit(.minutes(10)))
    func manyEntries() throws {
        let folder = TemporaryFolder()
        // On a tmpfs when root can mount one: 20,000 creates on a busy ext4 measure the disk, not hcpack.
        let small = SmallFileSystem(at: folder.url("fs"), size: "128m")
        defer { withExtendedLifetime(small) {} }
        let count = 20_000
        let base = small?.path ?? folder.url("fs")
        let made = python(
            """
            import gzip
            def header(name, size=0):
                h = bytearray(512); h[0:len(name)] = name.encode()
                h[100:108] = b'0000644\\0'; h[108:116] = b'0000000\\0'; h[116:124] = b'0000000\\0'
                h[124:136] = b'%011o\\0' % size; h[136:148] = b'%011o\\0' % 1577836800
                h[148:156] = b' ' * 8; h[156:157] = b'0'; h[257:263] = b'ustar\\0'; h[263:265] = b'00'
                h[148:156] = b'%06o\\0 ' % sum(h)
                return bytes(h)
            plist = b'<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict><key>IAPProductIdentifier</key><string>com.example.many</string><key>ContentVersion</key><string>1.0</string><key>Files</key><array><string>a.json</string></array></dict></plist>'
            parts = [header('ContentInfo.plist', len(plist)), plist + bytes(-len(plist) % 512), header('Contents/a.json', 2), b'{}' + bytes(510)]
            parts += [header('Contents/many/%d/%d' % (k // 1000, k)) for k in range(\(count))]
            with gzip.open('many.tar.gz', 'wb', compresslevel=1) as f: f.write(b''.join(parts) + bytes(1024))
            """, in: folder.path)
        try #require(made.status == 0, "\(made.output)")
        let dest = base + "/dest"
        try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
        // A Python parent whose only child is hcpack: its RUSAGE_CHILDREN peak is hcpack's.
        let measured = python(
            """
            import resource, subprocess
            r = subprocess.run(['\(hcpackBinary())', 'install', '\(folder.url("many.tar.gz"))', '--dest', '\(dest)', '--quiet'])
            print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            """, in: folder.path)
        let fields = measured.output.split(whereSeparator: \.isWhitespace)
        try #require(fields.count == 2, "\(measured.output)")
        #expect(fields[0] == "0", "\(measured.output)")
        #expect((Int(fields[1]) ?? .max) < 200_000, "peak memory \(fields[1]) KB for \(count) entries")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dest).sorted() == [".hcpack", "a.json"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: dest + "/.hcpack").sorted() == ["lock", "receipts"])
    }

    @Test("A zip inside the package is content: installed byte for byte, never unpacked")
    func nestedZip() throws {
        let folder = TemporaryFolder()
        let made = python(
            """
            import io, zipfile
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, 'w') as z:
                z.writestr('../evil.txt', b'escaped'); z.writestr('Contents/inner.json', b'{}')
                z.writestr('ContentInfo.plist', b'<plist/>')
            open('inner.zip', 'wb').write(buffer.getvalue())
            """, in: folder.path)
        try #require(made.status == 0, "\(made.output)")
        let inner = try #require(folder.read("inner.zip"))
        var package = PackageArchive()
        package.files = [("bundle/inner.zip", inner), ("index.json", Array("{}\n".utf8))]
        let archive = package.write(to: folder.url("outer.zip"))
        #expect(hcpack(["verify", archive]).status == 0)
        folder.makeFolder("dest")
        let result = hcpack(["install", archive, "--dest", folder.url("dest")])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(folder.read("dest/bundle/inner.zip") == inner)
        #expect(regularFiles(folder.url("dest")).keys.sorted() == ["bundle/inner.zip", "index.json"])
        #expect(!FileManager.default.fileExists(atPath: folder.url("evil.txt")))
    }

    @Test("World-writable and executable entries install as 0644 files in 0755 folders, even under umask 000; setuid is refused")
    func modes() throws {
        let folder = TemporaryFolder()
        folder.makeFolder("input")
        let made = python(
            tarWithModes(
                [
                    ("Contents/a.json", "{}", 0o777), ("Contents/b.json", "{}", 0o666), ("Contents/dir/", "", 0o777),
                    ("Contents/dir/c.json", "{}", 0o755),
                ],
                listed: ["a.json", "b.json", "dir/c.json"]), in: folder.url("input"))
        try #require(made.status == 0, "\(made.output)")
        folder.makeFolder("dest")
        let result = run(
            "/bin/bash",
            [
                "-c", "umask 000; exec \"$0\" install \"$1\" --dest \"$2\"", hcpackBinary(), folder.url("input/bad.tar"),
                folder.url("dest"),
            ])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("[content.unsafe-permissions] Contents/a.json"), "\(result.output)")
        for (path, mode) in [("a.json", 0o644), ("b.json", 0o644), ("dir/c.json", 0o644), ("dir", 0o755)] {
            var info = stat()
            #expect(lstat(folder.url("dest/" + path), &info) == 0)
            #expect(Int(info.st_mode & 0o7777) == mode, "\(path): \(String(info.st_mode & 0o7777, radix: 8))")
        }

        // A listed setuid or setgid file has no innocent reason to be there: the install is refused.
        for mode in [0o4755, 0o2755] {
            folder.makeFolder("setid")
            let script = tarWithModes([("Contents/s.json", "{}", mode)], listed: ["s.json"])
            try #require(python(script, in: folder.url("setid")).status == 0)
            folder.makeFolder("dest2")
            let refused = hcpack(["install", folder.url("setid/bad.tar"), "--dest", folder.url("dest2")])
            #expect(refused.status == 1, "\(refused.stdout)")
            #expect(refused.stdout.contains("[content.unsafe-permissions] Contents/s.json"), "\(refused.stdout)")
            #expect(treeListing(folder.url("dest2")).isEmpty)
        }
    }
}
