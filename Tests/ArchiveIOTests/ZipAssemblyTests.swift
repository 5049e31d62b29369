@testable import ArchiveIO
import Foundation
import Testing

/// An archive assembled from one-entry zips (`ZipEntryWriter`) and a central directory written by hcpack
/// (`ZipCentralDirectory`) is byte for byte the archive one `ArchiveWriter` writes.
@Suite("ZipEntryWriter and ZipCentralDirectory")
struct ZipAssemblyTests {
    typealias Fixture = ArchiveWriterTests

    /// The archive one writer makes of `Fixture.entries`, in memory.
    static func wholeArchive(_ entries: [ArchiveWriteEntry]) throws -> [UInt8] {
        var bytes: [UInt8] = []
        let writer = try ArchiveWriter(format: .zip) { (chunk: UnsafeRawBufferPointer) throws(ArchiveError) in
            bytes += chunk
        }
        for entry in entries {
            try writer.begin(entry)
            if entry.kind == .file { try (Fixture.contents[entry.path] ?? []).withUnsafeBytes { data in try writer.write(data) } }
        }
        try writer.finish()
        return bytes
    }

    /// The same entries, each written by a `ZipEntryWriter`, the directory by `ZipCentralDirectory`.
    static func assembledArchive(_ entries: [ArchiveWriteEntry]) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var directory = ZipCentralDirectory()
        for entry in entries {
            let start = Int64(bytes.count)
            let writer = try ZipEntryWriter(entry) { (chunk: UnsafeRawBufferPointer) throws(ArchiveError) in bytes += chunk }
            if entry.kind == .file { try (Fixture.contents[entry.path] ?? []).withUnsafeBytes { data in try writer.write(data) } }
            try directory.append(try writer.finish(), localHeaderOffset: start)
        }
        bytes += try directory.finish(at: Int64(bytes.count))
        return bytes
    }

    @Test("Assembled entries give the single writer's bytes, folders, stored, deflated and empty files included")
    func sameBytes() throws {
        let whole = try Self.wholeArchive(Fixture.entries)
        #expect(try Self.assembledArchive(Fixture.entries) == whole)
        #expect(try Self.assembledArchive(Fixture.entries.reversed()) == Self.wholeArchive(Fixture.entries.reversed()))
    }

    @Test("A central record is taken only from one record and its end record, at offset 0")
    func strictTrailer() throws {
        let two = try Self.wholeArchive(Array(Fixture.entries.prefix(2)))
        let directoryStart = Int(two.uint32(two.count - 22 + 16))
        let trailer = Array(two[directoryStart...])
        #expect(throws: ArchiveError.self) { try ZipCentralRecord(trailer: trailer, path: "two") }
        let one = try Self.wholeArchive(Array(Fixture.entries.prefix(1)))
        let oneTrailer = Array(one[Int(one.uint32(one.count - 22 + 16))...])
        let record = try ZipCentralRecord(trailer: oneTrailer, path: "one")
        #expect(record.localRecordLength == Int64(one.count - oneTrailer.count))
        var moved = oneTrailer
        moved.storeUInt32(100, at: 42)
        #expect(throws: ArchiveError.self) { try ZipCentralRecord(trailer: moved, path: "moved") }
        #expect(throws: ArchiveError.self) { try ZipCentralRecord(trailer: Array(oneTrailer.dropLast()), path: "cut") }
    }

    @Test("The directory refuses what a plain end record cannot count")
    func limits() throws {
        let one = try Self.wholeArchive(Array(Fixture.entries.prefix(1)))
        let record = try ZipCentralRecord(trailer: Array(one[Int(one.uint32(one.count - 22 + 16))...]), path: "one")
        var directory = ZipCentralDirectory()
        #expect(throws: ArchiveError.self) { try directory.append(record, localHeaderOffset: 1 << 32) }
        #expect(throws: ArchiveError.self) { try directory.finish(at: 1 << 32) }
        for _ in 0..<ZipCentralDirectory.maxEntries { try directory.append(record, localHeaderOffset: 0) }
        #expect(throws: ArchiveError.self) { try directory.append(record, localHeaderOffset: 0) }
        let ending = try directory.finish(at: 0)
        #expect(ending.uint16(ending.count - 22 + 10) == UInt16(ZipCentralDirectory.maxEntries))
    }
}
