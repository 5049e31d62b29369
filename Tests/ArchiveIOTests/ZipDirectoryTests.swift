import ArchiveIO
import Foundation
import Testing

@Suite("ZipDirectory: the facts of a zip's central directory and local headers")
struct ZipDirectoryTests {
    @Test("A zip from Python's zipfile: every field of every record and local header as written")
    func pythonZip() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import zipfile, sys
            with zipfile.ZipFile(sys.argv[1], 'w') as z:
                z.writestr('a.txt', b'hello')
                z.writestr(zipfile.ZipInfo('d/'), b'')
                z.writestr('d/\\u4e16\\u754c.txt', b'x' * 1000, compress_type=zipfile.ZIP_DEFLATED)
            """, [dir.path("p.zip")])
        let (directory, entries) = try ZipDirectory.entries(path: dir.path("p.zip"))
        #expect(directory.defects.isEmpty, "\(directory.defects)")
        #expect(directory.entryCount == 3 && directory.declaredEntries == 3)
        #expect(directory.zip64End == nil)
        #expect(directory.end?.trailingBytes == 0)
        try #require(entries.count == 3)
        #expect(entries.map { String(decoding: $0.name, as: UTF8.self) } == ["a.txt", "d/", "d/世界.txt"])
        #expect(entries[0].method == 0 && entries[0].crc32 == 0x3610_a686 && entries[0].uncompressedSize == 5)
        #expect(entries[0].localHeaderOffset == 0 && entries[0].local?.dataOffset == 30 + 5)
        #expect(entries[0].span == 0..<40)
        #expect(!entries[0].isUTF8 && entries[2].isUTF8, "zipfile sets bit 11 for non-ASCII names only")
        #expect(entries[1].isDirectoryName)
        #expect(entries[2].method == 8 && entries[2].uncompressedSize == 1000 && entries[2].compressedSize < 100)
        for entry in entries {
            #expect(entry.local?.name == entry.name)
            #expect(entry.local?.method == entry.method)
            #expect(entry.local?.crc32 == entry.crc32)
            #expect(entry.local?.compressedSize == entry.compressedSize)
            #expect(entry.zip64 == nil && entry.local?.zip64 == nil)
            #expect(entry.localHeaderDefect == nil)
        }
        // The same facts from bytes in memory.
        var fromBytes: [ZipEntryFacts] = []
        _ = try ZipDirectory.read(bytes: try dir.read("p.zip")) { fromBytes.append($0) }
        #expect(fromBytes.map(\.name) == entries.map(\.name))
        #expect(fromBytes.map(\.span) == entries.map(\.span))
    }

    @Test("Data descriptors, a forced zip64 local field and a Unicode Path field are reported as found")
    func descriptorsAndExtras() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import zipfile, sys, struct, zlib
            with zipfile.ZipFile(sys.argv[1], 'w') as z:
                with z.open('big.bin', 'w', force_zip64=True) as f: f.write(b'y' * 10)
                info = zipfile.ZipInfo('u.txt'); info.extra = struct.pack('<HHB', 0x7075, 5 + 3, 1) + struct.pack('<I', zlib.crc32(b'u.txt')) + b'v.t'
                z.writestr(info, b'u')
            """, [dir.path("x.zip")])
        let (directory, entries) = try ZipDirectory.entries(path: dir.path("x.zip"))
        #expect(directory.defects.isEmpty, "\(directory.defects)")
        try #require(entries.count == 2)
        let big = entries[0]
        let local = try #require(big.local)
        // What this Python wrote: 3.11.4 and later saturate the local sizes (0xFFFFFFFF) and put them in the zip64
        // field; 3.11.2 (Debian 12) writes them in both places (gh-103861).
        let bytes = try dir.read("x.zip")
        try #require(bytes.count > 30 && bytes[0..<4] == [0x50, 0x4b, 0x03, 0x04])
        let saturated = bytes[18..<26].allSatisfy { $0 == 0xff }
        #expect(saturated || bytes[18..<26].elementsEqual([10, 0, 0, 0, 10, 0, 0, 0]), "an unknown shape: \(Array(bytes[18..<26]))")
        #expect(local.zip64?.hasField == true && local.zip64?.saturatedFields == (saturated ? 2 : 0))
        #expect(local.uncompressedSize == 10 && local.compressedSize == 10, "the sizes, from the zip64 field or beside it")
        #expect(big.zip64 == nil, "the central record of a small entry has no zip64 field")
        #expect(entries[1].extra.unicodePath?.name == Array("v.t".utf8))
        #expect(entries[1].extra.unicodePath?.version == 1)
    }

    @Test("Data descriptors are read where the data ends: signed with 4-byte sizes, and 8-byte after a local zip64 field; gaps are found")
    func dataDescriptorsAndGaps() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        // zipfile writing to a pipe sets bit 3 and writes signed descriptors (8-byte sizes with force_zip64);
        // then 5 bytes of padding holding half a signature go before the central directory (offset moved).
        try python(
            """
            import zipfile, sys, io, struct
            class Pipe(io.RawIOBase):
                def __init__(s): s.b = bytearray()
                def writable(s): return True
                def write(s, b): s.b += b; return len(b)
            p = Pipe()
            with zipfile.ZipFile(p, 'w', zipfile.ZIP_DEFLATED) as z:
                z.writestr('a.txt', b'hello' * 100)
                with z.open('b.bin', 'w', force_zip64=True) as f: f.write(b'y' * 10)
            b = bytes(p.b); cd = b.find(b'PK\\x01\\x02'); eocd = b.rfind(b'PK\\x05\\x06')
            b = bytearray(b[:cd] + b'PK\\x03xx' + b[cd:]); eocd += 5
            b[eocd + 16:eocd + 20] = struct.pack('<I', cd + 5)
            open(sys.argv[1], 'wb').write(b)
            """, [dir.path("d.zip")])
        let (directory, entries) = try ZipDirectory.entries(path: dir.path("d.zip"))
        #expect(directory.defects.isEmpty, "\(directory.defects)")
        try #require(entries.count == 2)
        for entry in entries {
            let descriptor = try #require(entry.descriptor)
            #expect(entry.hasDataDescriptor && descriptor.hasSignature)
            #expect(descriptor.crc32 == entry.crc32)
            #expect(descriptor.compressedSize == entry.compressedSize && descriptor.uncompressedSize == entry.uncompressedSize)
            #expect(descriptor.offset == (entry.local?.dataOffset ?? 0) + entry.compressedSize)
            #expect(entry.span?.upperBound == descriptor.offset + UInt64(descriptor.byteCount))
        }
        #expect(entries[0].descriptor?.isSixtyFour == false && entries[0].descriptor?.byteCount == 16)
        #expect(entries[1].descriptor?.isSixtyFour == true && entries[1].descriptor?.byteCount == 24)
        #expect(entries[0].span?.upperBound == entries[1].localHeaderOffset, "no gap between the entries")
        let end = try #require(entries[1].span?.upperBound)
        #expect(directory.gaps.map(\.range) == [end..<(end + 5)], "\(directory.gaps)")
        #expect(directory.gaps.first?.localHeaderOffset == nil, "half a signature is none")
    }

    @Test("A central record whose local header differs is reported with both sides")
    func localDiffers() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import zipfile, sys
            with zipfile.ZipFile(sys.argv[1], 'w') as z: z.writestr('Contents/a.txt', b'data')
            b = bytearray(open(sys.argv[1], 'rb').read())
            at = b.find(b'PK\\x01\\x02'); b[at + 46:at + 60] = b'Contents/../xt'
            open(sys.argv[1], 'wb').write(b)
            """, [dir.path("m.zip")])
        let (_, entries) = try ZipDirectory.entries(path: dir.path("m.zip"))
        try #require(entries.count == 1)
        #expect(entries[0].name == Array("Contents/../xt".utf8))
        #expect(entries[0].local?.name == Array("Contents/a.txt".utf8))
    }

    @Test("A zip64 end record and locator are read, with where the locator points")
    func zip64End() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        // zipfile writes the zip64 end record past 65,535 entries.
        try python(
            """
            import zipfile, sys
            with zipfile.ZipFile(sys.argv[1], 'w') as z:
                for i in range(65536): z.writestr('%d' % i, b'')
            """, [dir.path("many.zip")])
        var count = 0
        let directory = try ZipDirectory.read(path: dir.path("many.zip")) { _ in count += 1 }
        #expect(directory.defects.isEmpty, "\(directory.defects)")
        let sixtyFour = try #require(directory.zip64End)
        #expect(sixtyFour.totalEntries == 65536 && count == 65536)
        #expect(sixtyFour.recordOffset == UInt64(sixtyFour.adjacentOffset))
        #expect(directory.end?.totalEntries == 0xffff)
    }

    @Test(
        "Damaged and hostile structure gives defects, never a crash, in bounded time",
        arguments: [
            ("no end record", [UInt8](repeating: 0x41, count: 100)),
            ("empty", []),
            ("end record only", [0x50, 0x4b, 0x05, 0x06] + [UInt8](repeating: 0, count: 18)),
            ("directory past the end", [0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 1, 0, 1, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]),
            (
                "65535 declared, none there",
                [0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
            ),
            (
                "locator to nowhere",
                [0x50, 0x4b, 0x06, 0x07, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0]
                    + [0x50, 0x4b, 0x05, 0x06] + [UInt8](repeating: 0xff, count: 16) + [0, 0]
            ),
        ] as [(String, [UInt8])])
    func hostile(_ name: String, _ bytes: [UInt8]) throws {
        var visited = 0
        let directory = try ZipDirectory.read(bytes: bytes) { _ in visited += 1 }
        // Either a defect, or facts that give the damage away (the count declared is not the count read).
        let consistent = directory.defects.isEmpty && directory.declaredEntries == UInt64(directory.entryCount)
        #expect(consistent == (name == "end record only"), "\(name): \(directory.defects)")
        #expect(visited <= 1)
    }

    @Test("A central record pointing past the file or at a non-header is a per-entry defect; the limits stop the read")
    func entryDefectsAndLimits() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import zipfile, sys, struct
            with zipfile.ZipFile(sys.argv[1], 'w') as z:
                for i in range(5): z.writestr('f%d' % i, b'x')
            b = bytearray(open(sys.argv[1], 'rb').read())
            first = b.find(b'PK\\x01\\x02'); second = b.find(b'PK\\x01\\x02', first + 4)
            b[first + 42:first + 46] = struct.pack('<I', 0x7fffff00)   # past the end
            b[second + 42:second + 46] = struct.pack('<I', 3)           # inside a header
            open(sys.argv[1], 'wb').write(b)
            """, [dir.path("d.zip")])
        let (directory, entries) = try ZipDirectory.entries(path: dir.path("d.zip"))
        try #require(entries.count == 5)
        #expect(entries[0].local == nil && entries[0].localHeaderDefect?.contains("past the end") == true)
        #expect(entries[1].local == nil && entries[1].localHeaderDefect?.contains("no local header") == true)
        #expect(entries[2].local != nil)
        #expect(directory.defects.isEmpty)
        let limited = try ZipDirectory.read(path: dir.path("d.zip"), limits: ZipDirectoryLimits(maxEntries: 2)) { _ in }
        #expect(limited.entryCount == 2)
        #expect(limited.defects.contains { $0.contains("maxEntries") })
    }

    @Test("Thousands of mutated zips (bytes, truncations, saturated fields) read without a trap, each bounded")
    func mutations() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try python(
            """
            import zipfile, sys
            with zipfile.ZipFile(sys.argv[1], 'w') as z:
                z.writestr('a.txt', b'hello'); z.writestr('d/', b'')
                z.writestr('d/\\u00e9.txt', b'x' * 300, compress_type=zipfile.ZIP_DEFLATED)
                with z.open('z.bin', 'w', force_zip64=True) as f: f.write(b'zz')
            """, [dir.path("seed.zip")])
        let seed = try dir.read("seed.zip")
        var state: UInt64 = 0x9e37_79b9_7f4a_7c15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(max(bound, 1)))
        }
        var withDefects = 0
        for round in 0..<3000 {
            var bytes = seed
            switch round % 4 {
            case 0: for _ in 0...next(4) { bytes[next(bytes.count)] = UInt8(truncatingIfNeeded: next(256)) }
            case 1: for _ in 0...next(4) { bytes[next(bytes.count)] = 0xff }
            case 2: bytes = Array(bytes.prefix(next(bytes.count)))
            default:
                let at = next(bytes.count - 4)
                bytes.replaceSubrange(at..<(at + 4), with: [0xff, 0xff, 0xff, 0xff])
            }
            var visited = 0
            let directory = try ZipDirectory.read(bytes: bytes) { entry in
                visited += 1
                _ = entry.span
                _ = entry.extra.unicodePath
            }
            #expect(visited == directory.entryCount && visited <= 4)
            if !directory.defects.isEmpty { withDefects += 1 }
        }
        #expect(withDefects > 100, "the mutations do reach the structure")
    }
}
