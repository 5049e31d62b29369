import ArchiveIO
import Foundation
import Testing

@Suite("ArchiveWriter")
struct ArchiveWriterTests {
    static let mtime: Int64 = 1_700_000_000
    static let defense = "Contents/Ouvertures/Défense.json"
    static let contents: [String: [UInt8]] = [
        "ContentInfo.plist": Array("<?xml version=\"1.0\"?><plist><dict/></plist>\n".utf8),
        defense: Array(String(repeating: "{\"e4\": \"c5\"}\n", count: 50).utf8),
        "Contents/readme.txt": Array("plain text, stored\n".utf8),
        "Contents/empty": [],
    ]
    static func file(_ path: String, _ permissions: UInt32 = 0o644, _ compression: EntryCompression = .deflate)
        -> ArchiveWriteEntry
    {
        ArchiveWriteEntry(
            path: path, kind: .file, size: Int64(contents[path]?.count ?? 0), permissions: permissions,
            modificationTime: mtime, compression: compression)
    }
    static let entries: [ArchiveWriteEntry] = [
        file("ContentInfo.plist"),
        ArchiveWriteEntry(path: "Contents/", kind: .directory, permissions: 0o755, modificationTime: mtime),
        ArchiveWriteEntry(path: "Contents/Ouvertures", kind: .directory, permissions: 0o755, modificationTime: mtime),
        file(defense, 0o644, .deflate),
        file("Contents/readme.txt", 0o600, .store),
        file("Contents/empty"),
    ]

    @Test("a zip reads back with ArchiveReader, unzip -t and Python zipfile", arguments: [false, true])
    func zipRoundTrip(fromMemory: Bool) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.path("out.zip")
        try writeArchive(to: path, format: .zip, entries: Self.entries, contents: Self.contents)

        let reader = fromMemory ? try ArchiveReader(bytes: dir.read("out.zip")) : try ArchiveReader(path: path)
        let read = try readAll(reader)
        #expect(reader.formatName?.hasPrefix("ZIP") == true)
        #expect(
            read.map(\.entry.path) == [
                "ContentInfo.plist", "Contents/", "Contents/Ouvertures/", Self.defense, "Contents/readme.txt",
                "Contents/empty",
            ])
        for (entry, data) in read {
            #expect(entry.modificationTime == Self.mtime)
            #expect(entry.pathBytes == Array(entry.path!.utf8))
            if entry.kind == .file {
                #expect(data == Self.contents[entry.path!])
                #expect(entry.declaredSize == Int64(data.count))
            } else {
                #expect(entry.kind == .directory)
                #expect(entry.permissions == 0o755)
            }
        }
        #expect(read.first { $0.entry.path == "Contents/readme.txt" }?.entry.permissions == 0o600)

        let unzip = try run("unzip", ["-t", path])
        #expect(unzip.contains("No errors detected"))

        // compress_type 8 = deflate, 0 = stored; flag 0x800 = UTF-8 name; extra fields: UT (0x5455) and
        // ux (0x7875) with uid 0 and gid 0, nothing else.
        let report = try python(
            """
            import sys, zipfile, struct
            z = zipfile.ZipFile(sys.argv[1])
            assert z.testzip() is None
            for i in z.infolist():
                extra, fields = i.extra, []
                while extra:
                    tag, size = struct.unpack('<HH', extra[:4]); fields.append('%04x:%s' % (tag, extra[4:4+size].hex())); extra = extra[4+size:]
                print(i.filename, i.compress_type, hex(i.flag_bits & 0x800), oct(i.external_attr >> 16), i.create_system, ' '.join(fields))
            """, [path])
        let lines = report.split(separator: "\n").map(String.init)
        #expect(lines.count == 6)
        #expect(lines.contains { $0.hasPrefix("\(Self.defense) 8 0x800 0o100644 3 ") })
        #expect(lines.contains { $0.hasPrefix("Contents/readme.txt 0 0x0 0o100600 3 ") })
        #expect(lines.contains { $0.hasPrefix("Contents/ 0 0x0 0o40755 3 ") })
        for line in lines {
            // Central directory: UT with flags 1 + mtime 1700000000 (0x6553f100); ux v1, 4-byte uid 0, gid 0.
            #expect(line.hasSuffix(" 5455:0100f15365 7875:0104000000000400000000"), "\(line)")
        }
    }

    @Test("per-entry compression really switches between store and deflate")
    func perEntryCompression() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let data = [UInt8](repeating: 0x41, count: 4096)
        var entries: [ArchiveWriteEntry] = []
        var contents: [String: [UInt8]] = [:]
        for (index, compression) in [EntryCompression.store, .deflate, .store, .deflate].enumerated() {
            entries.append(
                ArchiveWriteEntry(
                    path: "f\(index)", kind: .file, size: 4096, permissions: 0o644, modificationTime: 0,
                    compression: compression))
            contents["f\(index)"] = data
        }
        try writeArchive(to: dir.path("c.zip"), format: .zip, entries: entries, contents: contents)
        let listing = try python(
            """
            import sys, zipfile
            for i in zipfile.ZipFile(sys.argv[1]).infolist(): print(i.compress_type, i.compress_size)
            """, [dir.path("c.zip")])
        let rows = listing.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(rows.map { $0[0] } == ["0", "8", "0", "8"])
        #expect(rows[0][1] == "4096")
        #expect(Int(rows[1][1]).map { $0 < 100 } == true)
        let read = try readAll(ArchiveReader(path: dir.path("c.zip")))
        #expect(read.allSatisfy { $0.data == data })
    }

    @Test("a tar.gz reads back, with uid/gid 0, no names, no gzip timestamp")
    func tarGzipRoundTrip() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.path("out.tar.gz")
        try writeArchive(to: path, format: .tarGzip, entries: Self.entries, contents: Self.contents)

        let reader = try ArchiveReader(path: path)
        let read = try readAll(reader)
        #expect(reader.formatName != nil)
        #expect(
            read.map(\.entry.path) == [
                "ContentInfo.plist", "Contents/", "Contents/Ouvertures/", Self.defense, "Contents/readme.txt",
                "Contents/empty",
            ])
        for (entry, data) in read where entry.kind == .file {
            #expect(data == Self.contents[entry.path!])
        }

        let bytes = try dir.read("out.tar.gz")
        #expect(Array(bytes.prefix(3)) == [0x1F, 0x8B, 0x08])
        #expect(Array(bytes[4..<8]) == [0, 0, 0, 0], "gzip MTIME must be 0")

        let report = try python(
            """
            import sys, tarfile
            with tarfile.open(sys.argv[1]) as t:
                for m in t.getmembers():
                    print(repr(m.name), m.uid, m.gid, repr(m.uname), repr(m.gname), m.mtime, oct(m.mode), sorted(m.pax_headers))
            """, [path])
        let lines = report.split(separator: "\n").map(String.init)
        #expect(lines.count == 6)
        for line in lines {
            #expect(line.contains(" 0 0 '' '' 1700000000 "), "\(line)")
        }
        // Only the non-ASCII name needs a pax record, and it holds nothing but the path.
        #expect(lines.contains("'\(Self.defense)' 0 0 '' '' 1700000000 0o644 ['path']"))
        #expect(lines.contains("'ContentInfo.plist' 0 0 '' '' 1700000000 0o644 []"))
    }

    @Test("the same calls give byte-identical archives", arguments: [ArchiveWriteFormat.zip, .tarGzip])
    func reproducible(format: ArchiveWriteFormat) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try writeArchive(to: dir.path("a"), format: format, entries: Self.entries, contents: Self.contents)
        // A later wall clock must not matter (the gzip header would carry it).
        usleep(1_100_000)
        try writeArchive(to: dir.path("b"), format: format, entries: Self.entries, contents: Self.contents)
        let first = try dir.read("a")
        #expect(first.count > 100)
        #expect(first == (try dir.read("b")))
    }

    @Test(
        "a full disk surfaces as .io with errno ENOSPC (in write or, when buffered, in finish)",
        arguments: [(ArchiveWriteFormat.zip, 256 * 1024), (.zip, 5), (.tarGzip, 5)])
    func diskFull(format: ArchiveWriteFormat, size: Int) throws {
        let fd = open("/dev/full", O_WRONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let writer = try ArchiveWriter(fileDescriptor: fd, format: format)
        let data = [UInt8](repeating: 7, count: size)
        let error = archiveError {
            try writer.begin(
                ArchiveWriteEntry(
                    path: "big", kind: .file, size: Int64(data.count), permissions: 0o644, modificationTime: 0,
                    compression: .store))
            try data.withUnsafeBytes { try writer.write($0) }
            try writer.finish()
        }
        #expect(error?.code == .io)
        #expect(error?.errno == ENOSPC, "\(String(describing: error))")
    }

    @Test("misuse is .usage: data without a file, too much or too little data, other kinds")
    func misuse() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let fd = open(dir.path("m.zip"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        let writer = try ArchiveWriter(fileDescriptor: fd, format: .zip)
        let five: [UInt8] = [1, 2, 3, 4, 5]
        #expect(archiveError { try five.withUnsafeBytes { try writer.write($0) } }?.code == .usage)
        #expect(
            archiveError {
                try writer.begin(ArchiveWriteEntry(path: "l", kind: .symlink, permissions: 0o777, modificationTime: 0))
            }?.code == .usage)
        try writer.begin(ArchiveWriteEntry(path: "f", kind: .file, size: 4, permissions: 0o644, modificationTime: 0))
        #expect(archiveError { try five.withUnsafeBytes { try writer.write($0) } }?.code == .usage)
        try five.prefix(3).withUnsafeBytes { try writer.write($0) }
        #expect(archiveError { try writer.finish() }?.code == .usage)
        try five.suffix(1).withUnsafeBytes { try writer.write($0) }
        try writer.finish()
        #expect(archiveError { try writer.finish() }?.code == .usage)
        let read = try readAll(ArchiveReader(path: dir.path("m.zip")))
        #expect(read.map(\.data) == [[1, 2, 3, 5]])
    }
}
