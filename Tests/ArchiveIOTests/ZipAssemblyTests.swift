@testable import ArchiveIO
import Foundation
import Testing

/// An archive assembled from runs of entries written apart (`ZipRunWriter`) and a central directory written
/// by hcpack (`ZipCentralDirectory`) is byte for byte the archive one `ArchiveWriter` writes.
@Suite("ZipRunWriter and ZipCentralDirectory")
struct ZipAssemblyTests {
    typealias Fixture = ArchiveWriterTests

    /// An entry's data: the fixture's, also for its copy under "again/".
    static func data(_ entry: ArchiveWriteEntry) -> [UInt8] {
        let path = entry.path.hasPrefix("again/") ? String(entry.path.dropFirst("again/".count)) : entry.path
        return Fixture.contents[path] ?? []
    }

    /// The archive one writer makes of `entries`, in memory.
    static func wholeArchive(_ entries: [ArchiveWriteEntry]) throws -> [UInt8] {
        var bytes: [UInt8] = []
        let writer = try ArchiveWriter(format: .zip) { (chunk: UnsafeRawBufferPointer) throws(ArchiveError) in
            bytes += chunk
        }
        for entry in entries {
            try writer.begin(entry)
            if entry.kind == .file { try data(entry).withUnsafeBytes { chunk in try writer.write(chunk) } }
        }
        try writer.finish()
        return bytes
    }

    /// The same entries, the `n`-th written by run `n % runCount`, the local records put together in order and
    /// the directory written by `ZipCentralDirectory`.
    static func assembledArchive(_ entries: [ArchiveWriteEntry], runCount: Int) throws -> [UInt8] {
        let runs = try (0..<runCount).map { _ in try ZipRunWriter() }
        var locals: [[UInt8]] = []
        for (index, entry) in entries.enumerated() {
            var local: [UInt8] = []
            let run = runs[index % runCount]
            try run.begin(entry) { (chunk: UnsafeRawBufferPointer) throws(ArchiveError) in local += chunk }
            if entry.kind == .file { try data(entry).withUnsafeBytes { chunk in try run.write(chunk) } }
            try run.end()
            locals.append(local)
        }
        let records = try runs.map { try $0.finish() }
        var bytes: [UInt8] = []
        var directory = ZipCentralDirectory()
        for (index, local) in locals.enumerated() {
            try directory.append(records[index % runCount], index / runCount, localHeaderOffset: Int64(bytes.count))
            bytes += local
        }
        bytes += try directory.finish(at: Int64(bytes.count))
        return bytes
    }

    @Test("Assembled runs give the single writer's bytes, folders, stored, deflated and empty files included", arguments: [1, 2, 3])
    func sameBytes(runCount: Int) throws {
        let entries = Fixture.entries + Fixture.entries.reversed().map { entry in
            var copy = entry
            copy.path = "again/" + entry.path
            return copy
        }
        let whole = try Self.wholeArchive(entries)
        let same = try Self.assembledArchive(entries, runCount: runCount) == whole
        #expect(same)
    }

    @Test("A run's records are taken only when there is one per entry, at its offset, then one end record")
    func strictTrailer() throws {
        let two = try Self.wholeArchive(Array(Fixture.entries.prefix(2)))
        let directoryStart = Int(two.uint32(two.count - 22 + 16))
        let trailer = Array(two[directoryStart...])
        let firstLength = 46 + Int(trailer.uint16(28)) + Int(trailer.uint16(30)) + Int(trailer.uint16(32))
        let second = Int64(trailer.uint32(firstLength + 42))
        #expect(second > 0)
        let starts: [(offset: Int64, path: String)] = [(0, "a"), (second, "b")]
        let records = try ZipCentralRecords(splitting: trailer, starts: starts, runLength: Int64(directoryStart))
        #expect(records.count == 2)
        #expect(throws: ArchiveError.self) {
            try ZipCentralRecords(splitting: trailer, starts: Array(starts.prefix(1)), runLength: Int64(directoryStart))
        }
        #expect(throws: ArchiveError.self) {
            try ZipCentralRecords(splitting: trailer, starts: [(0, "a"), (second + 1, "b")], runLength: Int64(directoryStart))
        }
        #expect(throws: ArchiveError.self) {
            try ZipCentralRecords(splitting: Array(trailer.dropLast()), starts: starts, runLength: Int64(directoryStart))
        }
        #expect(throws: ArchiveError.self) {
            try ZipCentralRecords(splitting: trailer, starts: starts, runLength: Int64(directoryStart) + 1)
        }
    }

    @Test("The directory refuses what a plain end record cannot count")
    func limits() throws {
        let run = try ZipRunWriter()
        try run.begin(Fixture.entries[1]) { (_: UnsafeRawBufferPointer) throws(ArchiveError) in }
        try run.end()
        let records = try run.finish()
        var directory = ZipCentralDirectory()
        #expect(throws: ArchiveError.self) { try directory.append(records, 0, localHeaderOffset: 1 << 32) }
        #expect(throws: ArchiveError.self) { try directory.finish(at: 1 << 32) }
        for _ in 0..<ZipCentralDirectory.maxEntries { try directory.append(records, 0, localHeaderOffset: 0) }
        #expect(throws: ArchiveError.self) { try directory.append(records, 0, localHeaderOffset: 0) }
        let ending = try directory.finish(at: 0)
        #expect(ending.uint16(ending.count - 22 + 10) == UInt16(ZipCentralDirectory.maxEntries))
    }
}

/// Stored entries given their CRC-32 are written without a data descriptor (bit 3), which Java's
/// ZipInputStream refuses on a stored entry; the archive keeps libarchive's length and offsets.
@Suite("ArchiveWriter: stored entries without data descriptors")
struct UndescribedEntryTests {
    typealias Fixture = ArchiveWriterTests

    /// The fixture's entries (deflated and stored ones in turn), or every file stored (`allStored`), each given its
    /// CRC-32 when `withCRC`.
    static func entries(allStored: Bool, withCRC: Bool) -> [ArchiveWriteEntry] {
        Fixture.entries.map { entry in
            var copy = entry
            if entry.kind == .file {
                if allStored { copy.compression = .store }
                copy.crc32 = withCRC ? CRC32.checksum(ZipAssemblyTests.data(entry)) : nil
            }
            return copy
        }
    }

    @Test(
        "Given its CRC-32, a stored entry has it and its sizes in the local header and no bit 3, anywhere; deflated ones keep theirs",
        arguments: [0, 1, 2], [false, true])
    func noDescriptor(runCount: Int, allStored: Bool) throws {
        // A single writer is not told where an entry ends (`endEntry`), as `hcpack build` writes it whole.
        let described = try ZipAssemblyTests.wholeArchive(Self.entries(allStored: allStored, withCRC: false))
        let entries = Self.entries(allStored: allStored, withCRC: true)
        let bytes =
            runCount == 0 ? try ZipAssemblyTests.wholeArchive(entries) : try ZipAssemblyTests.assembledArchive(entries, runCount: runCount)
        // The padding field takes the descriptor's place: same length, same offsets.
        #expect(bytes.count == described.count)
        var files = 0
        try ZipDirectory.read(bytes: bytes) { entry in
            let local = try #require(entry.local)
            if entry.method == 8 {
                #expect(entry.hasDataDescriptor && local.hasDataDescriptor)
                return
            }
            #expect(!entry.hasDataDescriptor && !local.hasDataDescriptor, "\(String(decoding: entry.name, as: UTF8.self))")
            if !entry.isDirectoryName {
                files += 1
                #expect(local.crc32 == entry.crc32 && local.uncompressedSize == entry.uncompressedSize)
                #expect(local.compressedSize == entry.compressedSize && entry.method == 0)
                #expect(local.extra.first(ArchiveWriter.paddingID)?.data.count == 12)
            }
        }
        #expect(files == (allStored ? 4 : 1))  // the fixture stores only readme.txt
        // Libarchive still reads every entry and checks every CRC-32.
        var read: [String: [UInt8]] = [:]
        for (entry, data) in try readAll(ArchiveReader(bytes: bytes)) where entry.kind == .file {
            read[entry.path ?? ""] = data
        }
        #expect(read == Fixture.contents)
    }

    @Test("A zip64 header (sizes 0xFFFFFFFF) reserves libarchive's 24-byte descriptor; sizes other than the entry's are refused")
    func zip64Header() throws {
        func header(compressed: UInt32, uncompressed: UInt32) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: 30) + Array("big.bin".utf8) + [0x01, 0x00, 0x10, 0x00] + [UInt8](repeating: 0, count: 16)
            bytes.storeUInt32(ArchiveWriter.localSignature, at: 0)
            bytes.storeUInt16(0x0808, at: 6)  // UTF-8 and descriptor
            bytes.storeUInt32(compressed, at: 18)
            bytes.storeUInt32(uncompressed, at: 22)
            bytes.storeUInt16(7, at: 26)
            bytes.storeUInt16(20, at: 28)
            return bytes
        }
        let written = header(compressed: 0xFFFF_FFFF, uncompressed: 0xFFFF_FFFF)
        let (bytes, length) = try ArchiveWriter.undescribedHeader(written, crc32: 0xDEAD_BEEF, size: 5 << 30, path: "big.bin")
        #expect(length == 24 && bytes.count == written.count + 24)
        #expect(bytes.uint16(6) == 0x0800 && bytes.uint32(14) == 0xDEAD_BEEF && bytes.uint16(28) == 44)
        #expect(bytes.uint16(written.count) == ArchiveWriter.paddingID && bytes.uint16(written.count + 2) == 20)
        #expect(throws: ArchiveError.self) {
            try ArchiveWriter.undescribedHeader(header(compressed: 10, uncompressed: 11), crc32: 0, size: 10, path: "big.bin")
        }
        var deflated = written
        deflated.storeUInt16(8, at: 8)
        #expect(throws: ArchiveError.self) { try ArchiveWriter.undescribedHeader(deflated, crc32: 0, size: 5 << 30, path: "big.bin") }
    }

    @Test("Data whose CRC-32 is not the one given fails the entry")
    func wrongCRC() throws {
        let writer = try ArchiveWriter(format: .zip) { (_: UnsafeRawBufferPointer) throws(ArchiveError) in }
        var entry = ArchiveWriterTests.file("Contents/readme.txt", 0o644, .store)
        let data = Fixture.contents["Contents/readme.txt"] ?? []
        entry.crc32 = CRC32.checksum(data) ^ 1
        try writer.begin(entry)
        try data.withUnsafeBytes { try writer.write($0) }
        let error = try #require(throws: ArchiveError.self) { try writer.endEntry() }
        #expect(error.message.contains("changed while it was written"))
    }
}
