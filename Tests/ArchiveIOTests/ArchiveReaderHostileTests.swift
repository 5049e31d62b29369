import ArchiveIO
import Foundation
import Testing

@Suite("ArchiveReader: hostile input")
struct ArchiveReaderHostileTests {
    @Test("a missing file is .io with ENOENT; a directory is .io with EISDIR")
    func missingFile() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let missing = archiveError { _ = try ArchiveReader(path: dir.path("nope.zip")) }
        #expect(missing?.code == .io)
        #expect(missing?.errno == ENOENT)
        let directory = archiveError { _ = try ArchiveReader(path: dir.url.path) }
        #expect(directory?.code == .io)
        #expect(directory?.errno == EISDIR)
    }

    @Test("an encrypted zip entry is reported, and reading it throws .encrypted")
    func encrypted() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try dir.write("secret.txt", Array("top secret\n".utf8))
        try dir.write("plain.txt", Array("hello\n".utf8))
        try run("zip", ["-q", "-P", "pw", "e.zip", "secret.txt"], in: dir.url)
        try run("zip", ["-q", "e.zip", "plain.txt"], in: dir.url)
        let reader = try ArchiveReader(path: dir.path("e.zip"))
        let entry = try #require(try reader.next())
        #expect(entry.path == "secret.txt")
        #expect(entry.isEncrypted)
        #expect(archiveError { _ = try reader.readData { _ in } }?.code == .encrypted)
        // Not fatal: the next entry still reads.
        let next = try #require(try reader.next())
        #expect(!next.isEncrypted)
        var data: [UInt8] = []
        _ = try reader.readData { data += $0 }
        #expect(data == Array("hello\n".utf8))
    }

    @Test("a zip whose stored data was changed fails its CRC check with .corrupt")
    func badCRC() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import sys, io, zipfile
            b = io.BytesIO()
            with zipfile.ZipFile(b, 'w', zipfile.ZIP_STORED) as z: z.writestr('a.txt', b'hello world ' * 10)
            d = bytearray(b.getvalue()); d[d.find(b'hello') + 3] ^= 1
            open(sys.argv[1], 'wb').write(d)
            """, [dir.path("crc.zip")])
        let reader = try ArchiveReader(path: dir.path("crc.zip"))
        _ = try reader.next()
        let error = archiveError { _ = try reader.readData { _ in } }
        #expect(error?.code == .corrupt)
        #expect(error?.message.contains("checksum mismatch") == true)
        // The reader stays failed.
        #expect(archiveError { _ = try reader.next() }?.code == .corrupt)
    }

    @Test("a truncated tar.gz is .corrupt")
    func truncated() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import sys, io, tarfile, random
            r = random.Random(1); data = bytes(r.getrandbits(8) for _ in range(200000))
            b = io.BytesIO()
            with tarfile.open(fileobj=b, mode='w:gz') as t:
                ti = tarfile.TarInfo('big'); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
            g = b.getvalue(); open(sys.argv[1], 'wb').write(g[:len(g) // 2])
            """, [dir.path("t.tar.gz")])
        let error = archiveError { try drain(ArchiveReader(path: dir.path("t.tar.gz"))) }
        #expect(error?.code == .corrupt)
    }

    @Test("formats we do not read are .unsupportedFormat, named when recognizable")
    func unsupported() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try dir.write("tree/a.txt", Array("a\n".utf8))
        try run("bsdtar", ["--format", "cpio", "-cf", "x.cpio", "tree"], in: dir.url)
        try run("bsdtar", ["--format", "iso9660", "-cf", "x.iso", "tree"], in: dir.url)
        try run("bsdtar", ["--format", "7zip", "-cf", "x.7z", "tree"], in: dir.url)
        try run("bsdtar", ["-czf", "x.cpio.gz", "--format", "cpio", "tree"], in: dir.url)
        try run("bsdtar", ["--format", "xar", "-cf", "x.xar", "tree"], in: dir.url)
        // RAR 5 signature followed by junk; random bytes; nothing at all.
        try dir.write("x.rar", [0x52, 0x61, 0x72, 0x21, 0x1A, 0x07, 0x01, 0x00] + (0..<200).map { UInt8($0 % 251) })
        var generator = SystemRandomNumberGenerator()
        try dir.write("x.bin", (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try dir.write("x.empty", [])

        let expected: [(String, String?)] = [
            ("x.cpio", "cpio"), ("x.iso", "ISO 9660"), ("x.7z", "7-Zip"), ("x.rar", "RAR"),
            ("x.cpio.gz", "gzip"), ("x.xar", "xar"), ("x.bin", nil), ("x.empty", nil),
        ]
        for (name, word) in expected {
            let error = archiveError { try drain(ArchiveReader(path: dir.path(name))) }
            #expect(error?.code == .unsupportedFormat, "\(name): \(String(describing: error))")
            if let word {
                #expect(error?.message.contains(word) == true, "\(name): \(String(describing: error))")
            }
        }
        let fromMemory = archiveError { try drain(ArchiveReader(bytes: dir.read("x.iso"))) }
        #expect(fromMemory?.code == .unsupportedFormat)
    }

    @Test("more entries than maxEntries is .limitExceeded")
    func tooManyEntries() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        for index in 0..<5 { try dir.write("t/\(index)", [UInt8(index)]) }
        try run("bsdtar", ["-cf", "many.tar", "t"], in: dir.url)
        let error = archiveError {
            try drain(ArchiveReader(path: dir.path("many.tar"), limits: ArchiveLimits(maxEntries: 4)))
        }
        #expect(error?.code == .limitExceeded)
        #expect(error?.message.contains("maxEntries") == true)
        // Exactly at the limit is fine (t/ plus 5 files).
        try drain(ArchiveReader(path: dir.path("many.tar"), limits: ArchiveLimits(maxEntries: 6)))
    }

    /// A zip whose headers say 10 bytes but whose deflate stream inflates to 10 MiB.
    static func lyingZip(in dir: TempDir) throws -> String {
        try python(
            """
            import sys, io, zipfile, struct
            b = io.BytesIO()
            with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as z: z.writestr('zeros', bytes(10 << 20))
            d = bytearray(b.getvalue())
            struct.pack_into('<I', d, 22, 10)
            c = d.find(b'PK\\x01\\x02'); struct.pack_into('<I', d, c + 24, 10)
            open(sys.argv[1], 'wb').write(d)
            """, [dir.path("lie.zip")])
        return dir.path("lie.zip")
    }

    @Test("maxEntryBytes counts delivered bytes, not the declared size")
    func entryLimitWithLyingSize() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = try Self.lyingZip(in: dir)
        let reader = try ArchiveReader(path: path, limits: ArchiveLimits(maxEntryBytes: 64 * 1024))
        let entry = try #require(try reader.next())
        #expect(entry.declaredSize == 10)
        var delivered = 0
        let error = archiveError { _ = try reader.readData { delivered += $0.count } }
        #expect(error?.code == .limitExceeded)
        #expect(error?.message.contains("maxEntryBytes") == true)
        #expect(delivered <= 64 * 1024)
    }

    @Test("more data than declared is .corrupt even within the limits")
    func moreThanDeclared() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let reader = try ArchiveReader(path: try Self.lyingZip(in: dir))
        _ = try reader.next()
        var delivered = 0
        let error = archiveError { _ = try reader.readData { delivered += $0.count } }
        #expect(error?.code == .corrupt)
        #expect(delivered <= 10)
    }

    @Test("a compression bomb stops at maxCompressionRatio; maxTotalBytes caps all entries")
    func bomb() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
                z.writestr('a', bytes(50 << 20))
            """, [dir.path("bomb.zip")])
        let ratio = ArchiveLimits(maxCompressionRatio: 100, ratioGraceBytes: 1 << 20)
        var delivered = 0
        let error = archiveError {
            let reader = try ArchiveReader(path: dir.path("bomb.zip"), limits: ratio)
            _ = try reader.next()
            _ = try reader.readData { delivered += $0.count }
        }
        #expect(error?.code == .limitExceeded)
        #expect(error?.message.contains("maxCompressionRatio") == true)
        #expect(delivered < 8 << 20)

        let total = ArchiveLimits(maxTotalBytes: 2 << 20, maxCompressionRatio: 1e9)
        let totalError = archiveError { try drain(ArchiveReader(path: dir.path("bomb.zip"), limits: total)) }
        #expect(totalError?.code == .limitExceeded)
        #expect(totalError?.message.contains("maxTotalBytes") == true)
    }
}
