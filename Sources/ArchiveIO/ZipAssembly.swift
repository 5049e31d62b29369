/// Writes a run of zip entries with one libarchive writer, exactly as `ArchiveWriter` writes them inside a
/// whole archive, for an archive assembled from runs made apart (on several cores, as `hcpack build`
/// deflates): each entry's local record (header, data, data descriptor) goes to the output given with it, as
/// libarchive makes it, and `finish()` returns the run's central records, for `ZipCentralDirectory` to place
/// among the others.
///
/// libarchive's local records do not depend on where they sit in the archive, and its central records only
/// through the local header offset (a plain 32-bit field below 4 GiB): so an archive assembled from runs is
/// byte for byte the one a single writer makes, as long as it needs no zip64 directory
/// (`ZipCentralDirectory.fits`). One writer for the whole run, not one per entry: setting a writer up cost
/// more than deflating a small file.
///
/// Not thread-safe; any number of them on different threads.
public final class ZipRunWriter {
    /// Where the bytes go: the current entry's output, then the trailer (central records and end record).
    private final class Routing {
        var output: ArchiveWriter.Output?
        var trailer: [UInt8] = []
        /// Bytes passed to outputs so far: where the next local record starts within the run.
        var position: Int64 = 0
    }
    private let writer: ArchiveWriter
    private let routing = Routing()
    /// Where each entry's local record starts within the run, and its name (for messages).
    private var starts: [(offset: Int64, path: String)] = []

    public init() throws(ArchiveError) {
        let routing = routing
        writer = try ArchiveWriter(format: .zip) { (bytes: UnsafeRawBufferPointer) throws(ArchiveError) in
            if let output = routing.output {
                routing.position += Int64(bytes.count)
                try output(bytes)
            } else {
                routing.trailer.append(contentsOf: bytes)
            }
        }
    }

    /// Starts an entry whose local record goes to `output`: its header at once, its data with each `write`.
    public func begin(_ entry: ArchiveWriteEntry, output: @escaping ArchiveWriter.Output) throws(ArchiveError) {
        routing.output = output
        starts.append((routing.position, entry.path))
        try writer.begin(entry)
    }

    /// The entry's next data bytes (`ArchiveWriter.write`).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(ArchiveError) {
        try writer.write(bytes)
    }

    /// Ends the entry: its data descriptor goes to its output.
    /// - Throws: `.usage` when the entry did not get its declared size; `.io` when the output failed.
    public func end() throws(ArchiveError) {
        try writer.endEntry()
        routing.output = nil
    }

    /// Ends the run: its entries' central records, in the order they were written.
    /// - Throws: `.io` when libarchive's trailer is not one central record per entry at the offset each
    ///   was written at, then one end record (a libarchive this code does not know).
    public func finish() throws(ArchiveError) -> ZipCentralRecords {
        routing.output = nil
        try writer.finish()
        let trailer = routing.trailer
        routing.trailer = []
        return try ZipCentralRecords(splitting: trailer, starts: starts, runLength: routing.position)
    }
}

/// A run's central records as libarchive wrote them, in the run's order, their local header offsets still
/// the run's: one buffer and a range per record (26,000 arrays of 100 bytes cost more than the bytes).
public struct ZipCentralRecords: Sendable {
    let trailer: [UInt8]
    let ranges: [Range<Int>]

    static let signature: UInt32 = 0x0201_4b50
    static let endSignature: UInt32 = 0x0605_4b50
    static let fixedLength = 46
    static let endLength = 22
    static let offsetField = 42

    public var count: Int { ranges.count }

    /// Splits what a run ends with: one central record per entry of `starts` (each at its offset), then the
    /// end of central directory for a directory right after `runLength` bytes.
    init(splitting trailer: [UInt8], starts: [(offset: Int64, path: String)], runLength: Int64) throws(ArchiveError) {
        func unexpected(_ what: String) -> ArchiveError {
            ArchiveError(.io, "libarchive ended a run of zip entries with \(what); this libarchive writes zips hcpack cannot assemble")
        }
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(starts.count)
        var at = 0
        for (offset, path) in starts {
            guard trailer.count - at >= Self.fixedLength, trailer.uint32(at) == Self.signature else {
                throw unexpected("no central record for '\(path)'")
            }
            let length =
                Self.fixedLength + Int(trailer.uint16(at + 28)) + Int(trailer.uint16(at + 30))
                + Int(trailer.uint16(at + 32))
            guard trailer.count - at >= length, Int64(trailer.uint32(at + Self.offsetField)) == offset else {
                throw unexpected("a central record for '\(path)' that does not point where it was written")
            }
            ranges.append(at..<(at + length))
            at += length
        }
        guard trailer.count - at == Self.endLength, trailer.uint32(at) == Self.endSignature,
            Int(trailer.uint16(at + 10)) == starts.count, Int(trailer.uint32(at + 12)) == at,
            Int64(trailer.uint32(at + 16)) == runLength, trailer.uint16(at + 20) == 0
        else {
            throw unexpected("more records than entries, or an end record that does not describe them")
        }
        self.trailer = trailer
        self.ranges = ranges
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
        bytes.reserveCapacity(capacity + ZipCentralRecords.endLength)
    }

    /// The size of the central record libarchive writes for an entry named with `nameLength` bytes: the fixed
    /// part, the name, and its "UT" (9 bytes) and "ux" (15 bytes) extra fields.
    public static func recordLength(nameLength: Int) -> Int {
        ZipCentralRecords.fixedLength + nameLength + 24
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

    /// Adds the next entry's record, `records`' `index`-th; its local header starts `offset` bytes into the archive.
    /// - Throws: `.usage` past the limits of `fits`.
    public mutating func append(_ records: ZipCentralRecords, _ index: Int, localHeaderOffset offset: Int64) throws(ArchiveError) {
        guard count < Self.maxEntries, offset >= 0, offset <= Self.maxField else {
            throw ArchiveError(.usage, "an assembled zip holds at most \(Self.maxEntries) entries below 4 GiB; write it whole")
        }
        let start = bytes.count
        bytes += records.trailer[records.ranges[index]]
        bytes.storeUInt32(UInt32(offset), at: start + ZipCentralRecords.offsetField)
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
        bytes += [UInt8](repeating: 0, count: ZipCentralRecords.endLength)
        bytes.storeUInt32(ZipCentralRecords.endSignature, at: size)
        bytes.storeUInt16(UInt16(count), at: size + 8)
        bytes.storeUInt16(UInt16(count), at: size + 10)
        bytes.storeUInt32(UInt32(size), at: size + 12)
        bytes.storeUInt32(UInt32(offset), at: size + 16)
        let finished = bytes
        bytes = []
        count = 0
        return finished
    }
}
