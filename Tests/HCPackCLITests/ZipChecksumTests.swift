import Foundation
import TestSupport
import Testing

/// verify and install check each zip entry's CRC-32 themselves (libarchive's check is off, the work is done
/// on another thread): the data read is compared with the entry's own central record.
@Suite("zip CRC-32s: every entry checked against its own record, whatever the order of the records")
struct ZipChecksumTests {
    /// A package of a deflated, a stored and a deflated file whose central records are written in the reverse
    /// of the file's order; `damage` then changes it (Python, `data` is the zip as a bytearray).
    static func makeZip(_ path: String, damage: String = "") {
        let program = """
            import zipfile, struct, sys, zlib
            out = sys.argv[1]
            plist = b'<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict><key>IAPProductIdentifier</key><string>com.example.crc</string><key>ContentVersion</key><string>1.0</string><key>Files</key><array><string>a.json</string><string>b.bin</string><string>c.json</string></array></dict></plist>'
            with zipfile.ZipFile(out, 'w') as z:
                z.writestr('ContentInfo.plist', plist)
                z.writestr('Contents/a.json', b'{"a": "' + b'x' * 3000 + b'"}', compress_type=zipfile.ZIP_DEFLATED)
                z.writestr('Contents/b.bin', bytes(range(256)) * 40)
                z.writestr('Contents/c.json', b'{"c": "' + b'y' * 3000 + b'"}', compress_type=zipfile.ZIP_DEFLATED)
            data = bytearray(open(out, 'rb').read())
            end = data.rfind(b'PK\\x05\\x06')
            size, start = struct.unpack('<II', data[end + 12:end + 20])
            records, at = [], start
            while at < start + size:
                n, m, k = struct.unpack('<HHH', data[at + 28:at + 34])
                records.append(bytes(data[at:at + 46 + n + m + k])); at += 46 + n + m + k
            data[start:start + size] = b''.join(reversed(records))
            def local(name):  # the local header: the name's first occurrence, after 30 bytes of header
                return data.find(name.encode()) - 30
            def central(name):  # the central record: its last occurrence, after 46 bytes of record
                return data.rfind(name.encode()) - 46
            \(damage)
            open(out, 'wb').write(data)
            """
        let made = run("python3", ["-c", program, path])
        #expect(made.status == 0, "fixture script failed: \(made.output)")
    }

    @Test("Central records in reverse order: verify and install accept the zip, and unzip -t agrees")
    func reversedRecordsAreValid() throws {
        let folder = TemporaryFolder()
        let archive = folder.url("reversed.zip")
        Self.makeZip(archive)
        #expect(run("unzip", ["-tq", archive]).status == 0)
        let verified = hcpack(["verify", archive])
        #expect(verified.status == 0, "\(verified.stdout)")
        folder.makeFolder("dest")
        let installed = hcpack(["install", archive, "--dest", folder.url("dest")])
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        #expect(folder.read("dest/b.bin") == Array((0..<40).flatMap { _ in (0...255).map { UInt8($0) } }))
    }

    @Test(
        "A damaged entry is refused by name (stored data changed, a deflated entry's CRC-32 changed in both headers); unzip -t refuses it too",
        arguments: [
            ("Contents/b.bin", "data[local('Contents/b.bin') + 30 + len('Contents/b.bin') + 100] ^= 1"),
            ("Contents/c.json", "data[local('Contents/c.json') + 14] ^= 0x40; data[central('Contents/c.json') + 16] ^= 0x40"),
        ])
    func damagedEntry(_ damaged: String, _ damage: String) throws {
        let folder = TemporaryFolder()
        let archive = folder.url("damaged.zip")
        Self.makeZip(archive, damage: damage)
        // unzip ran and found this entry's CRC-32 wrong (a missing unzip fails too, with 127 and no such line).
        let tested = run("unzip", ["-tq", archive])
        #expect(tested.status == 2, "\(tested.output)")
        #expect(tested.output.contains("\(damaged)") && tested.output.contains("bad CRC"), "the damage did not take: \(tested.output)")
        let verified = hcpack(["verify", archive, "--json"])
        #expect(verified.status == 1, "\(verified.stdout)")
        let problems = jsonObject(verified.stdout)?["problems"] as? [[String: Any]] ?? []
        let corrupt = problems.filter { $0["rule"] as? String == "archive.corrupt" }
        #expect(corrupt.map { $0["path"] as? String } == [damaged], "\(verified.stdout)")
        #expect(corrupt.allSatisfy { ($0["message"] as? String ?? "").contains("CRC-32") })
        folder.write("dest/mine.txt", "the user's file")
        let before = treeListing(folder.url("dest"))
        let installed = hcpack(["install", archive, "--dest", folder.url("dest")])
        #expect(installed.status == 1, "\(installed.stdout)\(installed.stderr)")
        #expect(treeListing(folder.url("dest")) == before)
    }
}
