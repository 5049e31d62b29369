import ArchiveIO
import Foundation
import Testing

@Suite("ArchiveReader: formats and entry kinds")
struct ArchiveReaderTests {
    /// A small tree: a directory, a non-ASCII name, an executable.
    static func makeTree(in dir: TempDir) throws -> [String: [UInt8]] {
        let files: [String: [UInt8]] = [
            "tree/ContentInfo.plist": Array("<plist/>\n".utf8),
            "tree/Contents/Ouvertures/Défense.json": Array(String(repeating: "[1,2,3]", count: 300).utf8),
            "tree/Contents/run.sh": Array("#!/bin/sh\n".utf8),
        ]
        for (name, data) in files { try dir.write(name, data) }
        chmod(dir.path("tree/Contents/run.sh"), 0o755)
        return files
    }

    /// (file name, tool, arguments run inside the temp dir)
    static let generators: [(String, String, [String])] = [
        ("t.zip", "zip", ["-qr", "t.zip", "tree"]),
        ("t.tar", "bsdtar", ["-cf", "t.tar", "tree"]),
        ("t.tar.gz", "bsdtar", ["-czf", "t.tar.gz", "tree"]),
        ("t.tar.bz2", "bsdtar", ["-cjf", "t.tar.bz2", "tree"]),
        ("t.tar.xz", "bsdtar", ["-cJf", "t.tar.xz", "tree"]),
        ("t.tar.zst", "bsdtar", ["--zstd", "-cf", "t.tar.zst", "tree"]),
        ("t.pax", "bsdtar", ["--format", "pax", "-cf", "t.pax", "tree"]),
    ]

    @Test("each supported format gives the right entries and data", arguments: generators.map(\.0))
    func formats(name: String) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let files = try Self.makeTree(in: dir)
        let (_, tool, arguments) = try #require(Self.generators.first { $0.0 == name })
        try run(tool, arguments, in: dir.url)

        let reader = try ArchiveReader(path: dir.path(name))
        let read = try readAll(reader)
        #expect(reader.formatName != nil)
        var seen: [String: [UInt8]] = [:]
        for (entry, data) in read {
            let path = try #require(entry.path)
            let normalized = path.hasSuffix("/") ? String(path.dropLast()) : path
            switch entry.kind {
            case .file: seen[normalized] = data
            case .directory: #expect(data.isEmpty)
            default: Issue.record("unexpected kind \(entry.kind) for \(path)")
            }
        }
        #expect(seen == files)
        #expect(read.first { $0.entry.path == "tree/Contents/run.sh" }?.entry.permissions == 0o755)
        #expect(read.contains { $0.entry.kind == .directory && $0.entry.path?.hasPrefix("tree/Contents") == true })
    }

    @Test("symlink, hard link, fifo, devices, directory; setuid/setgid/sticky bits are kept")
    func kinds() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import sys, tarfile, io
            with tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT) as t:
                def add(name, type, mode=0o644, data=None, **extra):
                    ti = tarfile.TarInfo(name); ti.type = type; ti.mode = mode; ti.mtime = 1234567890
                    for k, v in extra.items(): setattr(ti, k, v)
                    if data is not None:
                        ti.size = len(data); t.addfile(ti, io.BytesIO(data))
                    else:
                        t.addfile(ti)
                add('d', tarfile.DIRTYPE, 0o1777)
                add('f', tarfile.REGTYPE, 0o4755, b'abc')
                add('g', tarfile.REGTYPE, 0o2750, b'')
                add('s', tarfile.SYMTYPE, 0o777, linkname='f')
                add('h', tarfile.LNKTYPE, linkname='f')
                add('p', tarfile.FIFOTYPE)
                add('c', tarfile.CHRTYPE, devmajor=1, devminor=3)
                add('b', tarfile.BLKTYPE, devmajor=8, devminor=0)
            """, [dir.path("k.tar")])
        let read = try readAll(ArchiveReader(path: dir.path("k.tar")))
        let byName = Dictionary(uniqueKeysWithValues: read.map { ($0.entry.path ?? "?", $0) })
        #expect(byName["d/"]?.entry.kind == .directory)
        #expect(byName["d/"]?.entry.permissions == 0o1777)
        #expect(byName["f"]?.entry.kind == .file)
        #expect(byName["f"]?.entry.permissions == 0o4755)
        #expect(byName["f"]?.data == Array("abc".utf8))
        #expect(byName["f"]?.entry.modificationTime == 1_234_567_890)
        #expect(byName["g"]?.entry.permissions == 0o2750)
        #expect(byName["s"]?.entry.kind == .symlink)
        #expect(byName["s"]?.entry.linkTarget == "f")
        #expect(byName["h"]?.entry.kind == .hardlink)
        #expect(byName["h"]?.entry.linkTarget == "f")
        #expect(byName["p"]?.entry.kind == .fifo)
        #expect(byName["c"]?.entry.kind == .characterDevice)
        #expect(byName["b"]?.entry.kind == .blockDevice)
        #expect(read.count == 8)
    }

    @Test("a name that is not UTF-8 keeps its bytes and has no path")
    func nonUTF8Name() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import sys, tarfile, io
            with tarfile.open(sys.argv[1], 'w', format=tarfile.GNU_FORMAT, encoding='utf-8', errors='surrogateescape') as t:
                ti = tarfile.TarInfo(b'caf\\xe9.txt'.decode('utf-8', 'surrogateescape')); ti.size = 2
                t.addfile(ti, io.BytesIO(b'ok'))
            """, [dir.path("n.tar")])
        let read = try readAll(ArchiveReader(bytes: dir.read("n.tar")))
        #expect(read.count == 1)
        #expect(read.first?.entry.path == nil)
        #expect(read.first?.entry.pathBytes == [0x63, 0x61, 0x66, 0xE9, 0x2E, 0x74, 0x78, 0x74])
        #expect(read.first?.data == Array("ok".utf8))
    }

    @Test("zip sizes come from the central directory (the seekable zip reader is used)")
    func dataDescriptorZip() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        // Written to a non-seekable stream: local headers say size 0 and a data descriptor follows the data.
        try python(
            """
            import sys, io, zipfile
            class Stream(io.RawIOBase):
                def __init__(self): self.data = bytearray()
                def writable(self): return True
                def seekable(self): return False
                def write(self, b): self.data += b; return len(b)
            s = Stream()
            with zipfile.ZipFile(s, 'w', zipfile.ZIP_DEFLATED) as z:
                with z.open('dd.txt', 'w') as f: f.write(b'x' * 1000)
            open(sys.argv[1], 'wb').write(s.data)
            """, [dir.path("dd.zip")])
        for reader in [try ArchiveReader(path: dir.path("dd.zip")), try ArchiveReader(bytes: dir.read("dd.zip"))] {
            let read = try readAll(reader)
            #expect(read.first?.entry.declaredSize == 1000)
            #expect(read.first?.data == [UInt8](repeating: 0x78, count: 1000))
        }
    }

    @Test("sparse tar: holes arrive as zeros, the stream is contiguous")
    func sparse() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        // 1 MiB with one byte of data at 500000; GNU tar --sparse records only the data.
        let fd = open(dir.path("sp"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(fd >= 0)
        #expect(pwrite(fd, "X", 1, 500_000) == 1)
        #expect(ftruncate(fd, 1 << 20) == 0)
        close(fd)
        try run("tar", ["--sparse", "--format=gnu", "-cf", "sp.tar", "sp"], in: dir.url)
        #expect((try dir.read("sp.tar")).count < 100_000)

        let reader = try ArchiveReader(path: dir.path("sp.tar"))
        let entry = try #require(try reader.next())
        #expect(entry.isSparse)
        #expect(entry.declaredSize == 1 << 20)
        var position = 0
        var nonZero: [Int] = []
        let count = try reader.readData { block in
            for (index, byte) in block.enumerated() where byte != 0 { nonZero.append(position + index) }
            position += block.count
        }
        #expect(count == 1 << 20)
        #expect(nonZero == [500_000])
        #expect(try reader.next() == nil)

        // Holes count against the limits.
        let limited = try ArchiveReader(path: dir.path("sp.tar"), limits: ArchiveLimits(maxEntryBytes: 100_000))
        _ = try limited.next()
        #expect(archiveError { _ = try limited.readData { _ in } }?.code == .limitExceeded)
    }

    @Test("readData without a current entry is .usage")
    func readWithoutEntry() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try dir.write("a.txt", Array("a".utf8))
        try run("bsdtar", ["-cf", "a.tar", "a.txt"], in: dir.url)
        let reader = try ArchiveReader(path: dir.path("a.tar"))
        #expect(archiveError { _ = try reader.readData { _ in } }?.code == .usage)
        _ = try reader.next()
        #expect(try reader.readData { _ in } == 1)
        #expect(archiveError { _ = try reader.readData { _ in } }?.code == .usage)
        #expect(try reader.next() == nil)
    }
}

extension ArchiveReaderTests {
    struct Stop: Error {}

    @Test("an error thrown by the caller's body passes through, and the next entry still reads")
    func bodyThrows() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try dir.write("t/a", [UInt8](repeating: 1, count: 300_000))
        try dir.write("t/b", Array("b".utf8))
        try run("bsdtar", ["-czf", "t.tgz", "t/a", "t/b"], in: dir.url)
        let reader = try ArchiveReader(path: dir.path("t.tgz"))
        #expect(try reader.next()?.path == "t/a")
        #expect(throws: Stop.self) { _ = try reader.readData { _ in throw Stop() } }
        #expect(try reader.next()?.path == "t/b")
        var data: [UInt8] = []
        _ = try reader.readData { data += $0 }
        #expect(data == Array("b".utf8))
    }
}
