/// Writes one zip entry with libarchive exactly as `ArchiveWriter` writes it inside a whole archive, for an
/// archive assembled from entries made apart (on several cores, as `hcpack build` deflates): the entry's
/// local record (header, data, data descriptor) goes to `output` as libarchive makes it, and `finish()`
/// returns its central directory record, for `ZipCentralDirectory` to place.
///
/// libarchive's local records do not depend on where they sit in the archive, and its central records only
/// through the local header offset (a plain 32-bit field below 4 GiB): so an archive assembled from entries
/// is byte for byte the one a single writer makes, as long as it needs no zip64 directory
/// (`ZipCentralDirectory.fits`).
///
/// Not thread-safe; one writer per entry, any number of them on different threads.
public final class ZipEntryWriter {
    /// What libarchive writes after the entry: its central record and end record, kept rather than output.
    private final class Trailer {
        var isCapturing = false
        var bytes: [UInt8] = []
        /// Bytes passed to the output before it.
        var forwarded: Int64 = 0
    }
    private let writer: ArchiveWriter
    private let trailer = Trailer()
    private let path: String

    /// Starts the entry; its header goes to `output` at once, its data with each `write`.
    public init(_ entry: ArchiveWriteEntry, output: @escaping ArchiveWriter.Output) throws(ArchiveError) {
        let trailer = trailer
        path = entry.path
        writer = try ArchiveWriter(format: .zip) { (bytes: UnsafeRawBufferPointer) throws(ArchiveError) in
            if trailer.isCapturing {
                trailer.bytes.append(contentsOf: bytes)
            } else {
                trailer.forwarded += Int64(bytes.count)
                try output(bytes)
            }
        }
        try writer.begin(entry)
    }

    /// The entry's next data bytes (`ArchiveWriter.write`).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(ArchiveError) {
        try writer.write(bytes)
    }

    /// Ends the entry: its data descriptor goes to `output`; returns its central record.
    /// - Throws: `.usage` when the entry did not get its declared size; `.io` when the output failed or
    ///   libarchive's trailer is not one central record and one end record (a libarchive this code does not know).
    public func finish() throws(ArchiveError) -> ZipCentralRecord {
        try writer.endEntry()
        trailer.isCapturing = true
        try writer.finish()
        let record = try ZipCentralRecord(trailer: trailer.bytes, path: path)
        guard record.localRecordLength == trailer.forwarded else {
            throw ArchiveError(
                .io, "libarchive's directory puts the zip entry '\(path)' at \(record.localRecordLength) bytes, not the \(trailer.forwarded) written")
        }
        return record
    }
}

/// One entry's central directory record as libarchive wrote it for a one-entry archive (local header at 0).
public struct ZipCentralRecord: Sendable {
    /// The record's bytes; the local header offset (bytes 42..<46) is 0 until placed.
    var bytes: [UInt8]
    /// How long the entry's local record is: header, data and data descriptor.
    public let localRecordLength: Int64

    static let signature: UInt32 = 0x0201_4b50
    static let endSignature: UInt32 = 0x0605_4b50
    static let fixedLength = 46
    static let endLength = 22
    static let offsetField = 42

    /// Splits what a one-entry archive ends with: one central record, then the end of central directory.
    init(trailer: [UInt8], path: String) throws(ArchiveError) {
        func unexpected(_ what: String) -> ArchiveError {
            ArchiveError(.io, "libarchive ended the zip entry '\(path)' with \(what); this libarchive writes zips hcpack cannot assemble")
        }
        guard trailer.count >= Self.fixedLength + Self.endLength, trailer.uint32(0) == Self.signature else {
            throw unexpected("no central directory record")
        }
        let length =
            Self.fixedLength + Int(trailer.uint16(28)) + Int(trailer.uint16(30))
            + Int(trailer.uint16(32))
        guard trailer.count == length + Self.endLength, trailer.uint32(length) == Self.endSignature else {
            throw unexpected("more than one central record, or a zip64 end record")
        }
        guard trailer.uint16(length + 8) == 1, trailer.uint16(length + 10) == 1,
            Int(trailer.uint32(length + 12)) == length, trailer.uint16(length + 20) == 0,
            trailer.uint32(Self.offsetField) == 0
        else {
            throw unexpected("an end record that does not describe one entry at offset 0")
        }
        bytes = Array(trailer[..<length])
        localRecordLength = Int64(trailer.uint32(length + 16))
    }
}

/// The central directory of an assembled zip: each entry's central record with its local header offset
/// filled in, then the end of central directory record, as libarchive writes them for a whole archive.
public struct ZipCentralDirectory: Sendable {
    private var bytes: [UInt8] = []
    private var count = 0

    /// - Parameter capacity: the records' expected total size, reserved up front: a directory grown by
    ///   doubling held up to twice its size (26,000 entries: 3 MB) and copied it at each step.
    public init(reservingCapacity capacity: Int = 0) {
        bytes.reserveCapacity(capacity + ZipCentralRecord.endLength)
    }

    /// The size of the central record libarchive writes for an entry named with `nameLength` bytes: the fixed
    /// part, the name, and its "UT" (9 bytes) and "ux" (15 bytes) extra fields.
    public static func recordLength(nameLength: Int) -> Int {
        ZipCentralRecord.fixedLength + nameLength + 24
    }

    /// Largest offset or size a plain (not zip64) directory holds.
    static let maxField: Int64 = 0xFFFF_FFFE
    /// Most entries a plain end record counts.
    static let maxEntries = 0xFFFE

    /// True when an archive of `entryCount` entries and at most `bytes` bytes needs no zip64 directory, so
    /// that it can be assembled (otherwise write it with one `ArchiveWriter`).
    public static func fits(entryCount: Int, bytes: Int64) -> Bool {
        entryCount <= maxEntries && bytes <= maxField
    }

    /// Adds the next entry's record; its local header starts `offset` bytes into the archive.
    /// - Throws: `.usage` past the limits of `fits`.
    public mutating func append(_ record: ZipCentralRecord, localHeaderOffset offset: Int64) throws(ArchiveError) {
        guard count < Self.maxEntries, offset >= 0, offset <= Self.maxField else {
            throw ArchiveError(.usage, "an assembled zip holds at most \(Self.maxEntries) entries below 4 GiB; write it whole")
        }
        let start = bytes.count
        bytes += record.bytes
        bytes.storeUInt32(UInt32(offset), at: start + ZipCentralRecord.offsetField)
        count += 1
    }

    /// The records and the end record, for a directory that starts `offset` bytes into the archive; the
    /// directory is left empty (its bytes are moved out, not copied).
    /// - Throws: `.usage` past the limits of `fits`.
    public mutating func finish(at offset: Int64) throws(ArchiveError) -> [UInt8] {
        guard offset >= 0, offset <= Self.maxField, Int64(bytes.count) <= Self.maxField else {
            throw ArchiveError(.usage, "an assembled zip's directory must start below 4 GiB; write it whole")
        }
        let size = bytes.count
        let start = bytes.count
        bytes += [UInt8](repeating: 0, count: ZipCentralRecord.endLength)
        bytes.storeUInt32(ZipCentralRecord.endSignature, at: start)
        bytes.storeUInt16(UInt16(count), at: start + 8)
        bytes.storeUInt16(UInt16(count), at: start + 10)
        bytes.storeUInt32(UInt32(size), at: start + 12)
        bytes.storeUInt32(UInt32(offset), at: start + 16)
        let finished = bytes
        bytes = []
        count = 0
        return finished
    }
}
