#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Bounds on how much zip structure `ZipDirectory` reads, so that a hostile file costs bounded time and memory.
public struct ZipDirectoryLimits: Sendable, Equatable {
    /// Most central directory records read; past it the read stops with a defect.
    public var maxEntries: Int
    /// Largest central directory read into memory.
    public var maxCentralDirectoryBytes: Int64

    /// The defaults match `ArchiveLimits`' entry count; the central directory of a million entries with
    /// 200-byte names is about 250 MB, so 512 MiB bounds it.
    public init(maxEntries: Int = 1_000_000, maxCentralDirectoryBytes: Int64 = 512 << 20) {
        self.maxEntries = maxEntries
        self.maxCentralDirectoryBytes = maxCentralDirectoryBytes
    }
}

/// One extra field of a zip header: its ID (0x0001 zip64, 0x7075 Info-ZIP Unicode Path, ...) and data.
public struct ZipExtraField: Sendable, Equatable {
    public var id: UInt16
    public var data: [UInt8]
}

/// The extra fields of one header, and whether they filled the extra area exactly.
public struct ZipExtraFields: Sendable, Equatable {
    public var fields: [ZipExtraField] = []
    /// False when a field's size runs past the extra area (Python's zipfile refuses such a header).
    public var isWellFormed = true
    /// The extra area's length in bytes.
    public var byteCount = 0

    /// Splits an extra area into fields (APPNOTE 4.5.1: a 2-byte ID, a 2-byte size, then the data).
    init(_ bytes: ArraySlice<UInt8>) {
        byteCount = bytes.count
        var at = bytes.startIndex
        while at < bytes.endIndex {
            // Fewer than 4 bytes left: padding every reader skips.
            guard bytes.endIndex - at >= 4 else { return }
            let id = UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
            let size = Int(bytes[at + 2]) | Int(bytes[at + 3]) << 8
            guard bytes.endIndex - (at + 4) >= size else {
                isWellFormed = false
                return
            }
            fields.append(ZipExtraField(id: id, data: Array(bytes[(at + 4)..<(at + 4 + size)])))
            at += 4 + size
        }
    }

    /// The first field with `id`.
    public func first(_ id: UInt16) -> ZipExtraField? { fields.first { $0.id == id } }

    /// How many fields have `id`.
    public func count(_ id: UInt16) -> Int { fields.count { $0.id == id } }

    /// The Info-ZIP Unicode Path field (0x7075): version, CRC-32 of the header's name, the name in UTF-8.
    public var unicodePath: (version: UInt8, nameCRC32: UInt32, name: [UInt8])? {
        guard let field = first(ZipDirectory.unicodePathID), field.data.count >= 5 else { return nil }
        let data = field.data
        return (
            data[0], UInt32(data[1]) | UInt32(data[2]) << 8 | UInt32(data[3]) << 16 | UInt32(data[4]) << 24, Array(data[5...])
        )
    }
}

/// What a zip64 extended information field (0x0001) held for one header.
///
/// APPNOTE 4.5.3: the field carries, in this order, only the values whose 32-bit header field is saturated
/// (0xFFFFFFFF, or 0xFFFF for the disk); every reader that apps use reads it that way.
public struct ZipSixtyFourValues: Sendable, Equatable {
    public var uncompressedSize: UInt64?
    public var compressedSize: UInt64?
    public var localHeaderOffset: UInt64?
    public var diskStart: UInt32?
    /// A saturated field had no value in the zip64 field (or there was no zip64 field).
    public var isMissingValues = false
    /// Bytes of the zip64 field beyond the values the saturated fields call for.
    public var surplusBytes = 0
    /// The header has a zip64 field at all.
    public var hasField = false
    /// How many of the header's 32-bit fields are saturated.
    public var saturatedFields = 0
}

/// One central directory record, its local header, and where its data lies: the facts every zip reader
/// works from, read byte for byte (APPNOTE 4.3.7, 4.3.12).
public struct ZipEntryFacts: Sendable {
    /// Position in the central directory, from 0.
    public var index: Int
    /// Where the central directory record starts.
    public var recordOffset: Int64
    public var versionMadeBy: UInt16
    /// General-purpose flags: bit 0 encrypted, bit 3 sizes in a data descriptor, bit 6 strong encryption,
    /// bit 11 the name is UTF-8, bit 13 the central directory is encrypted.
    public var flags: UInt16
    public var method: UInt16
    public var crc32: UInt32
    /// The 32-bit fields as written (0xFFFFFFFF when the zip64 field holds the value).
    public var compressedSize32: UInt32
    public var uncompressedSize32: UInt32
    public var localHeaderOffset32: UInt32
    public var diskStart16: UInt16
    public var externalAttributes: UInt32
    /// The name as stored, undecoded.
    public var name: [UInt8]
    public var extra: ZipExtraFields
    /// The zip64 values for this record; nil when it has no zip64 field and needs none.
    public var zip64: ZipSixtyFourValues?
    /// The sizes and offset with the zip64 values applied.
    public var compressedSize: UInt64
    public var uncompressedSize: UInt64
    public var localHeaderOffset: UInt64
    /// The local header the record points at; nil when there is none there (see `localHeaderDefect`).
    public var local: ZipLocalHeader?
    /// Why `local` is nil.
    public var localHeaderDefect: String?
    /// The data descriptor after the data, when the central record or the local header sets bit 3 and one
    /// could be read there (`localHeaderDefect` says when it could not).
    public var descriptor: ZipDataDescriptor?

    /// The name is declared UTF-8 (general-purpose bit 11).
    public var isUTF8: Bool { flags & 0x0800 != 0 }
    /// Sizes and CRC-32 follow the data (general-purpose bit 3).
    public var hasDataDescriptor: Bool { flags & 0x0008 != 0 }
    /// Whether the name ends with '/', which every reader takes for a folder.
    public var isDirectoryName: Bool { name.last == UInt8(ascii: "/") }
    /// The Unix mode in the external attributes, when the record was made on Unix (host 3) and has one.
    public var unixMode: UInt32? {
        guard versionMadeBy >> 8 == 3 else { return nil }
        let mode = externalAttributes >> 16
        return mode == 0 ? nil : mode
    }

    /// The bytes the entry occupies: its local header, name, extra, data and data descriptor (the one read,
    /// or the smallest one it can have); nil without a local header. Two entries whose spans meet share bytes.
    public var span: Range<UInt64>? {
        guard let local else { return nil }
        let descriptor: UInt64 =
            hasDataDescriptor || local.hasDataDescriptor ? UInt64(self.descriptor?.byteCount ?? ZipDataDescriptor.smallest) : 0
        let (dataEnd, overflow) = local.dataOffset.addingReportingOverflow(compressedSize)
        let (end, overflowAgain) = dataEnd.addingReportingOverflow(descriptor)
        guard !overflow, !overflowAgain, end >= localHeaderOffset else { return nil }
        return localHeaderOffset..<end
    }
}

/// A local file header (APPNOTE 4.3.7).
public struct ZipLocalHeader: Sendable {
    public var flags: UInt16
    public var method: UInt16
    public var crc32: UInt32
    public var compressedSize32: UInt32
    public var uncompressedSize32: UInt32
    public var name: [UInt8]
    public var extra: ZipExtraFields
    /// The zip64 values the local header carries (both sizes, APPNOTE 4.5.3); nil without a zip64 field.
    public var zip64: ZipSixtyFourValues?
    /// The sizes with the zip64 values applied.
    public var compressedSize: UInt64
    public var uncompressedSize: UInt64
    /// Where the entry's data starts.
    public var dataOffset: UInt64

    /// Sizes and CRC-32 follow the data (bit 3): the header's own are then not meaningful.
    public var hasDataDescriptor: Bool { flags & 0x0008 != 0 }
}

/// The data descriptor that follows an entry's data when general-purpose bit 3 is set (APPNOTE 4.3.9): an
/// optional signature (0x08074b50), the CRC-32, then the compressed and uncompressed sizes, 8 bytes each when
/// the local header has a zip64 field (or the sizes need 64 bits), 4 otherwise.
public struct ZipDataDescriptor: Sendable, Equatable {
    /// The fewest bytes a descriptor takes: no signature, 4-byte sizes.
    public static let smallest = 12
    /// Where it starts: right after the data, whose length the central record gives.
    public var offset: UInt64
    /// It starts with the signature, as Go's archive/zip decides (the first 4 bytes are 0x08074b50).
    public var hasSignature: Bool
    /// Its sizes are 8 bytes each.
    public var isSixtyFour: Bool
    public var crc32: UInt32
    public var compressedSize: UInt64
    public var uncompressedSize: UInt64
    /// Its length: 12, 16, 20 or 24 bytes.
    public var byteCount: Int { (hasSignature ? 4 : 0) + 4 + (isSixtyFour ? 16 : 8) }
}

/// Bytes before the central directory that no entry covers. Streaming readers (libarchive on a pipe) search
/// such bytes for the next local header signature and unpack what they find there; Java's ZipInputStream
/// stops at the first bytes that are not a local header.
public struct ZipGap: Sendable, Equatable {
    public var range: Range<UInt64>
    /// Where the first local header signature (the bytes "PK", 3, 4) in the gap starts; nil when there is none.
    public var localHeaderOffset: UInt64?
}

/// The end of central directory record (APPNOTE 4.3.16).
public struct ZipEndOfCentralDirectory: Sendable, Equatable {
    /// Where the record starts.
    public var offset: Int64
    public var diskNumber: UInt16
    public var centralDirectoryDisk: UInt16
    public var entriesOnDisk: UInt16
    public var totalEntries: UInt16
    public var centralDirectorySize: UInt32
    public var centralDirectoryOffset: UInt32
    public var commentLength: UInt16
    /// Bytes after the record and its comment.
    public var trailingBytes: Int64

    /// Whether a field holds the value that sends readers to the zip64 record.
    public var isSaturated: Bool {
        diskNumber == 0xffff || centralDirectoryDisk == 0xffff || entriesOnDisk == 0xffff || totalEntries == 0xffff
            || centralDirectorySize == 0xffff_ffff || centralDirectoryOffset == 0xffff_ffff
    }
}

/// The zip64 end of central directory record and its locator (APPNOTE 4.3.14, 4.3.15).
public struct ZipSixtyFourEnd: Sendable, Equatable {
    /// Where the locator is (20 bytes before the end record).
    public var locatorOffset: Int64
    /// Where the locator says the record is.
    public var recordOffset: UInt64
    /// Where the record would be if it ended at the locator, which is where Python's zipfile reads it.
    public var adjacentOffset: Int64
    public var locatorDisk: UInt32
    public var totalDisks: UInt32
    public var diskNumber: UInt32
    public var centralDirectoryDisk: UInt32
    public var entriesOnDisk: UInt64
    public var totalEntries: UInt64
    public var centralDirectorySize: UInt64
    public var centralDirectoryOffset: UInt64
}

/// A zip's structure read without libarchive: the end records, every central directory record and every
/// local header one points at, each field as written. Facts only: which of them make a package
/// unacceptable is the domain's call.
///
/// Read with `pread` from a file (or from bytes in memory); the central directory is read whole (bounded by
/// `ZipDirectoryLimits`), each local header with one or two reads. Nothing in the input is trusted: every
/// offset and length is checked against the file before it is used.
public struct ZipDirectory: Sendable {
    static let endSignature: UInt32 = 0x0605_4b50
    static let centralSignature: UInt32 = 0x0201_4b50
    static let localSignature: UInt32 = 0x0403_4b50
    static let sixtyFourEndSignature: UInt32 = 0x0606_4b50
    static let sixtyFourLocatorSignature: UInt32 = 0x0706_4b50
    /// The zip64 extended information extra field.
    public static let zip64ID: UInt16 = 0x0001
    /// The Info-ZIP Unicode Path extra field.
    public static let unicodePathID: UInt16 = 0x7075
    /// The WinZip AES extra field.
    public static let aesID: UInt16 = 0x9901
    /// The PKWARE strong encryption header.
    public static let strongEncryptionID: UInt16 = 0x0017

    /// The archive's size in bytes.
    public var fileSize: Int64
    /// The end record; nil when none was found (then nothing else was read).
    public var end: ZipEndOfCentralDirectory?
    /// The zip64 end record, when a locator precedes the end record.
    public var zip64End: ZipSixtyFourEnd?
    /// Where the central directory was read from, and its size, as the end records give them.
    public var centralDirectoryOffset: UInt64 = 0
    public var centralDirectorySize: UInt64 = 0
    /// The entry count the end records declare.
    public var declaredEntries: UInt64 = 0
    /// Central directory records read.
    public var entryCount = 0
    /// Why the structure could not be read in full, or what in it no reader can agree on (a truncated
    /// central directory, a record without its signature, the limits): each a sentence without a trailing period.
    public var defects: [String] = []
    /// The defect that is a limit of `ZipDirectoryLimits` reached (also in `defects`), not damage: the
    /// archive may be sound, but larger than this reader was allowed to read.
    public var limitDefect: String?
    /// The stretches before the central directory that no entry's bytes cover (before the first entry, between
    /// two, after the last), in file order; found only when the records were read without a defect.
    public var gaps: [ZipGap] = []

    /// Reads the zip at `path`; `visit` gets every central directory record, in order, with its local header.
    /// - Parameter descriptor: an open descriptor of the zip to read instead of opening `path` (as
    ///   `ArchiveReader.init(path:descriptor:)`; the caller keeps its own).
    /// - Throws: `ArchiveError` `.io` when the file cannot be opened or read, or whatever `visit` throws.
    public static func read(
        path: String, descriptor opened: Int32? = nil, limits: ZipDirectoryLimits = ZipDirectoryLimits(),
        visit: (ZipEntryFacts) throws -> Void
    ) throws -> ZipDirectory {
        let descriptor = try ArchiveReader.openOrDuplicate(path, opened)
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let number = errno
            throw ArchiveError(.io, "cannot stat '\(path)': \(String(cString: strerror(number)))", errno: number)
        }
        func fill(_ buffer: UnsafeMutableRawBufferPointer, _ offset: Int64) -> Int {
            guard let base = buffer.baseAddress else { return 0 }
            var done = 0
            while done < buffer.count {
                let count = pread(descriptor, base + done, buffer.count - done, off_t(offset) + off_t(done))
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return count < 0 ? -Int(errno) : done }
                done += count
            }
            return done
        }
        let size = Int64(info.st_size)
        // A small regular file is read through one mapping: only the bytes asked for are copied, where each
        // read-ahead window copied 64 KiB (on a 1 MB zip of 200 entries, 48 preads were 3 MB). A file cut
        // short meanwhile raises SIGBUS, which the command line reports as for the archive's own mapping.
        if (info.st_mode & S_IFMT) == S_IFREG, size > 0, size <= mappedBytes,
            let base = mmap(nil, Int(size), PROT_READ, MAP_SHARED, descriptor, 0), base != MAP_FAILED
        {
            defer { munmap(base, Int(size)) }
            let mapped = UnsafeRawBufferPointer(start: base, count: Int(size))
            return try read(ZipInput(memory: mapped, name: path), limits: limits, visit: visit)
        }
        let window = ReadAheadWindow(fill: fill)
        let input = ZipInput(size: size, name: path) { buffer, offset in window.read(into: buffer, at: offset) }
        return try read(input, limits: limits, visit: visit)
    }

    /// Zips up to this size are read through a mapping of the whole file (`read(path:)`).
    static let mappedBytes: Int64 = 4 << 20

    /// Reads a zip held in memory, as `read(path:limits:visit:)` reads a file.
    public static func read(
        bytes: [UInt8], limits: ZipDirectoryLimits = ZipDirectoryLimits(), visit: (ZipEntryFacts) throws -> Void
    ) throws -> ZipDirectory {
        try bytes.withUnsafeBytes { memory in try read(ZipInput(memory: memory, name: "input"), limits: limits, visit: visit) }
    }

    /// Every record at once, for small archives and tests (the limits bound it).
    public static func entries(path: String, limits: ZipDirectoryLimits = ZipDirectoryLimits()) throws -> (
        ZipDirectory, [ZipEntryFacts]
    ) {
        var entries: [ZipEntryFacts] = []
        let directory = try read(path: path, limits: limits) { entries.append($0) }
        return (directory, entries)
    }

    private static func read(_ input: ZipInput, limits: ZipDirectoryLimits, visit: (ZipEntryFacts) throws -> Void) throws
        -> ZipDirectory
    {
        var directory = ZipDirectory(fileSize: input.size)
        guard let end = try findEnd(input) else {
            directory.defects.append("no end of central directory record: this is not a complete zip")
            return directory
        }
        directory.end = end
        if end.trailingBytes < 0 {
            directory.defects.append("the end record's comment runs \(-end.trailingBytes) bytes past the end of the file")
        }
        if end.commentLength > 0, try input.read(Int(end.commentLength), at: end.offset + 22)?.contains(endMarker) == true {
            directory.defects.append(
                "the zip comment holds an end of central directory signature: readers may take either for the end")
        }
        directory.declaredEntries = UInt64(end.totalEntries)
        directory.centralDirectoryOffset = UInt64(end.centralDirectoryOffset)
        directory.centralDirectorySize = UInt64(end.centralDirectorySize)
        var directoryEnd = end.offset  // where the central directory must end
        if end.offset >= 20, let locator = try input.read(20, at: end.offset - 20), locator.uint32(0) == sixtyFourLocatorSignature
        {
            let recordOffset = locator.uint64(8)
            var sixtyFour = ZipSixtyFourEnd(
                locatorOffset: end.offset - 20, recordOffset: recordOffset, adjacentOffset: end.offset - 20 - 56,
                locatorDisk: locator.uint32(4), totalDisks: locator.uint32(16), diskNumber: 0, centralDirectoryDisk: 0,
                entriesOnDisk: 0, totalEntries: 0, centralDirectorySize: 0, centralDirectoryOffset: 0)
            if recordOffset <= UInt64(Int64.max - 56), let record = try input.read(56, at: Int64(recordOffset)),
                record.uint32(0) == sixtyFourEndSignature
            {
                sixtyFour.diskNumber = record.uint32(16)
                sixtyFour.centralDirectoryDisk = record.uint32(20)
                sixtyFour.entriesOnDisk = record.uint64(24)
                sixtyFour.totalEntries = record.uint64(32)
                sixtyFour.centralDirectorySize = record.uint64(40)
                sixtyFour.centralDirectoryOffset = record.uint64(48)
                directory.zip64End = sixtyFour
                directory.declaredEntries = sixtyFour.totalEntries
                directory.centralDirectoryOffset = sixtyFour.centralDirectoryOffset
                directory.centralDirectorySize = sixtyFour.centralDirectorySize
                directoryEnd = Int64(recordOffset)
            } else {
                directory.defects.append("the zip64 locator points at \(recordOffset), where there is no zip64 end record")
                return directory
            }
        }
        if end.diskNumber != 0 || end.centralDirectoryDisk != 0 || end.entriesOnDisk != end.totalEntries {
            directory.defects.append("the end record describes a multi-disk (spanned) archive")
        }
        let offset = directory.centralDirectoryOffset
        let size = directory.centralDirectorySize
        guard offset <= UInt64(directoryEnd), size <= UInt64(directoryEnd) - offset else {
            directory.defects.append(
                "the central directory (\(size) bytes at \(offset)) does not fit before the end record at \(directoryEnd)")
            return directory
        }
        if offset + size != UInt64(directoryEnd) {
            // Readers that find the directory by the declared offset and those that find it by the end record's
            // position (and shift every offset, as for a self-extractor's stub) read different entries.
            directory.defects.append(
                "the central directory (\(size) bytes at \(offset)) does not end where the end record starts (\(directoryEnd)): \(UInt64(directoryEnd) - offset - size) bytes lie between them"
            )
        }
        guard Int64(size) <= limits.maxCentralDirectoryBytes else {
            directory.limitDefect = "the central directory is \(size) bytes, over the \(limits.maxCentralDirectoryBytes)-byte limit"
            directory.defects.append(directory.limitDefect ?? "")
            return directory
        }
        guard let central = try input.read(Int(size), at: Int64(offset)) else {
            directory.defects.append("the central directory is truncated")
            return directory
        }
        var covered: [Range<UInt64>] = []  // each entry's span, for the gaps
        var at = 0
        while at < central.count {
            guard directory.entryCount < limits.maxEntries else {
                directory.limitDefect = "the central directory has more than \(limits.maxEntries) records (limit maxEntries)"
                directory.defects.append(directory.limitDefect ?? "")
                return directory
            }
            guard central.count - at >= 46, central.uint32(at) == centralSignature else {
                directory.defects.append(
                    "central directory record \(directory.entryCount) at \(offset + UInt64(at)) has no signature or is truncated")
                return directory
            }
            let nameLength = Int(central.uint16(at + 28))
            let extraLength = Int(central.uint16(at + 30))
            let commentLength = Int(central.uint16(at + 32))
            let nameStart = at + 46
            let extraStart = nameStart + nameLength
            let recordEnd = extraStart + extraLength + commentLength
            guard recordEnd <= central.count else {
                directory.defects.append(
                    "central directory record \(directory.entryCount) runs past the end of the central directory")
                return directory
            }
            var entry = ZipEntryFacts(
                index: directory.entryCount, recordOffset: Int64(offset) + Int64(at), versionMadeBy: central.uint16(at + 4),
                flags: central.uint16(at + 8), method: central.uint16(at + 10), crc32: central.uint32(at + 16),
                compressedSize32: central.uint32(at + 20), uncompressedSize32: central.uint32(at + 24),
                localHeaderOffset32: central.uint32(at + 42), diskStart16: central.uint16(at + 34),
                externalAttributes: central.uint32(at + 38), name: Array(central[nameStart..<extraStart]),
                extra: ZipExtraFields(central[extraStart..<(extraStart + extraLength)]), zip64: nil, compressedSize: 0,
                uncompressedSize: 0, localHeaderOffset: 0, local: nil, localHeaderDefect: nil)
            let values = sixtyFourValues(
                entry.extra, uncompressed: entry.uncompressedSize32, compressed: entry.compressedSize32,
                offset: entry.localHeaderOffset32, disk: entry.diskStart16)
            entry.zip64 = values
            entry.uncompressedSize = values?.uncompressedSize ?? UInt64(entry.uncompressedSize32)
            entry.compressedSize = values?.compressedSize ?? UInt64(entry.compressedSize32)
            entry.localHeaderOffset = values?.localHeaderOffset ?? UInt64(entry.localHeaderOffset32)
            try readLocal(input, into: &entry)
            if let span = entry.span { covered.append(span) }
            try visit(entry)
            directory.entryCount += 1
            at = recordEnd
        }
        if directory.defects.isEmpty {
            directory.gaps = try findGaps(input, covered: covered, before: offset)
        }
        return directory
    }

    /// The stretches of `0..<end` outside every range of `covered`, each searched for a local header signature.
    private static func findGaps(_ input: ZipInput, covered: [Range<UInt64>], before end: UInt64) throws -> [ZipGap] {
        var gaps: [ZipGap] = []
        var cursor: UInt64 = 0
        for range in covered.sorted(by: { $0.lowerBound < $1.lowerBound }) + [end..<end] {
            if range.lowerBound > cursor {
                let gap = cursor..<min(range.lowerBound, end)
                if !gap.isEmpty { gaps.append(ZipGap(range: gap, localHeaderOffset: try findLocalSignature(input, in: gap))) }
            }
            cursor = max(cursor, range.upperBound)
        }
        return gaps
    }

    /// The first local header signature within `range` (all four bytes inside it), read 64 KiB at a time.
    private static func findLocalSignature(_ input: ZipInput, in range: Range<UInt64>) throws -> UInt64? {
        let chunk: UInt64 = 64 << 10
        var start = range.lowerBound
        while range.upperBound - start >= 4 {
            let count = min(chunk, range.upperBound - start)
            guard let bytes = try input.read(Int(count), at: Int64(start)) else { return nil }
            var index = 0
            while index + 4 <= bytes.count {
                if bytes[index] == 0x50, bytes.uint32(index) == localSignature { return start + UInt64(index) }
                index += 1
            }
            if start + count == range.upperBound { return nil }
            start += count - 3  // a signature may straddle two chunks
        }
        return nil
    }

    private static let endMarker: [UInt8] = [0x50, 0x4b, 0x05, 0x06]

    /// The last end record in the final 64 KiB + 22 bytes (where every reader looks), and what follows it.
    private static func findEnd(_ input: ZipInput) throws -> ZipEndOfCentralDirectory? {
        let length = Int(min(input.size, 22 + 65_535))
        guard length >= 22, let tail = try input.read(length, at: input.size - Int64(length)) else { return nil }
        var index = length - 22
        while index >= 0 {
            if tail.uint32(index) == endSignature {
                let comment = tail.uint16(index + 20)
                let trailing = Int64(length - (index + 22)) - Int64(comment)
                return ZipEndOfCentralDirectory(
                    offset: input.size - Int64(length) + Int64(index), diskNumber: tail.uint16(index + 4),
                    centralDirectoryDisk: tail.uint16(index + 6), entriesOnDisk: tail.uint16(index + 8),
                    totalEntries: tail.uint16(index + 10), centralDirectorySize: tail.uint32(index + 12),
                    centralDirectoryOffset: tail.uint32(index + 16), commentLength: trailing < 0 ? 0 : comment,
                    trailingBytes: trailing)
            }
            index -= 1
        }
        return nil
    }

    /// The zip64 values a header's saturated fields call for, read in APPNOTE order; nil when the header
    /// has neither a zip64 field nor a saturated field.
    static func sixtyFourValues(
        _ extra: ZipExtraFields, uncompressed: UInt32, compressed: UInt32, offset: UInt32?, disk: UInt16?
    ) -> ZipSixtyFourValues? {
        let field = extra.first(zip64ID)
        let wantsUncompressed = uncompressed == 0xffff_ffff
        let wantsCompressed = compressed == 0xffff_ffff
        let wantsOffset = offset == 0xffff_ffff
        let wantsDisk = disk == 0xffff
        guard field != nil || wantsUncompressed || wantsCompressed || wantsOffset || wantsDisk else { return nil }
        var values = ZipSixtyFourValues()
        values.hasField = field != nil
        values.saturatedFields = [wantsUncompressed, wantsCompressed, wantsOffset, wantsDisk].count { $0 }
        let data = field?.data ?? []
        var at = 0
        func next(_ width: Int) -> UInt64? {
            guard data.count - at >= width else {
                values.isMissingValues = true
                return nil
            }
            defer { at += width }
            return width == 8 ? data.uint64(at) : UInt64(data.uint32(at))
        }
        if wantsUncompressed { values.uncompressedSize = next(8) }
        if wantsCompressed { values.compressedSize = next(8) }
        if wantsOffset { values.localHeaderOffset = next(8) }
        if wantsDisk { values.diskStart = next(4).map { UInt32(truncatingIfNeeded: $0) } }
        values.surplusBytes = max(0, data.count - at)
        return values
    }

    /// Reads the local header `entry` points at (30 bytes, then its name and extra).
    private static func readLocal(_ input: ZipInput, into entry: inout ZipEntryFacts) throws {
        let offset = entry.localHeaderOffset
        guard offset <= UInt64(input.size), input.size - Int64(offset) >= 30 else {
            entry.localHeaderDefect = "points at offset \(offset), past the end of the file"
            return
        }
        // One read for the usual header: its name and extra are about as long as the central record's.
        let guess = min(Int64(30 + entry.name.count + entry.extra.byteCount + 64), input.size - Int64(offset))
        guard let head = try input.read(Int(guess), at: Int64(offset)) else {
            entry.localHeaderDefect = "points at offset \(offset), past the end of the file"
            return
        }
        let fixed = Array(head[..<30])
        guard fixed.uint32(0) == localSignature else {
            entry.localHeaderDefect = "points at offset \(offset), where there is no local header"
            return
        }
        let nameLength = Int(fixed.uint16(26))
        let extraLength = Int(fixed.uint16(28))
        let variable: [UInt8]
        if head.count >= 30 + nameLength + extraLength {
            variable = Array(head[30..<(30 + nameLength + extraLength)])
        } else if let read = try input.read(nameLength + extraLength, at: Int64(offset) + 30) {
            variable = read
        } else {
            entry.localHeaderDefect = "has a local header at \(offset) that runs past the end of the file"
            return
        }
        let extra = ZipExtraFields(variable[nameLength...])
        let compressed32 = fixed.uint32(18)
        let uncompressed32 = fixed.uint32(22)
        // A local zip64 field holds both sizes, uncompressed first, whenever either is saturated (APPNOTE 4.5.3).
        var values: ZipSixtyFourValues?
        let field = extra.first(zip64ID)
        let saturated = [uncompressed32 == 0xffff_ffff, compressed32 == 0xffff_ffff]
        if field != nil || saturated.contains(true) {
            var found = ZipSixtyFourValues(hasField: field != nil, saturatedFields: saturated.count { $0 })
            let data = field?.data ?? []
            if data.count >= 16 {
                if saturated[0] { found.uncompressedSize = data.uint64(0) }
                if saturated[1] { found.compressedSize = data.uint64(8) }
                found.surplusBytes = data.count - 16
            } else {
                found.isMissingValues = saturated.contains(true)
                found.surplusBytes = saturated.contains(true) ? 0 : data.count
            }
            values = found
        }
        entry.local = ZipLocalHeader(
            flags: fixed.uint16(6), method: fixed.uint16(8), crc32: fixed.uint32(14), compressedSize32: compressed32,
            uncompressedSize32: uncompressed32, name: Array(variable[..<nameLength]), extra: extra, zip64: values,
            compressedSize: values?.compressedSize ?? UInt64(compressed32),
            uncompressedSize: values?.uncompressedSize ?? UInt64(uncompressed32),
            dataOffset: offset + 30 + UInt64(nameLength) + UInt64(extraLength))
        if (entry.span?.upperBound ?? .max) > UInt64(input.size) {
            entry.localHeaderDefect = "has data that runs past the end of the file"
            return
        }
        if entry.hasDataDescriptor || (entry.local?.hasDataDescriptor ?? false) {
            try readDescriptor(input, into: &entry)
        }
    }

    static let descriptorSignature: UInt32 = 0x0807_4b50

    /// Reads the data descriptor right after the entry's data (the central record's compressed size long):
    /// with a signature when its first 4 bytes are one (as Go's archive/zip decides), with 8-byte sizes when
    /// the local header has a zip64 field (APPNOTE 4.3.9.2; Python's zipfile and libarchive write and read it
    /// so) or when the central sizes need 64 bits (Go's and Java's writers, which put no zip64 field locally).
    private static func readDescriptor(_ input: ZipInput, into entry: inout ZipEntryFacts) throws {
        guard let local = entry.local else { return }
        let start = local.dataOffset + entry.compressedSize  // fits: the span check ran first
        let isSixtyFour =
            local.zip64?.hasField == true || entry.compressedSize > UInt64(UInt32.max)
            || entry.uncompressedSize > UInt64(UInt32.max)
        let available = min(Int64(24), input.size - Int64(start))
        guard available >= Int64(ZipDataDescriptor.smallest), let bytes = try input.read(Int(available), at: Int64(start)) else {
            entry.localHeaderDefect = "has no data descriptor after its data (bit 3), where the file ends"
            return
        }
        let hasSignature = bytes.uint32(0) == descriptorSignature
        let at = hasSignature ? 4 : 0
        let length = at + 4 + (isSixtyFour ? 16 : 8)
        guard bytes.count >= length else {
            entry.localHeaderDefect = "has no complete data descriptor after its data (bit 3), where the file ends"
            return
        }
        entry.descriptor = ZipDataDescriptor(
            offset: start, hasSignature: hasSignature, isSixtyFour: isSixtyFour, crc32: bytes.uint32(at),
            compressedSize: isSixtyFour ? bytes.uint64(at + 4) : UInt64(bytes.uint32(at + 4)),
            uncompressedSize: isSixtyFour ? bytes.uint64(at + 12) : UInt64(bytes.uint32(at + 8)))
    }
}

/// Positioned reads of a file or a buffer; `read` returns nil for a range outside the input.
private struct ZipInput {
    let size: Int64
    let name: String
    /// Fills the buffer from the offset; returns the count read (short at the end), or -errno.
    let fill: (UnsafeMutableRawBufferPointer, Int64) -> Int

    init(size: Int64, name: String, fill: @escaping (UnsafeMutableRawBufferPointer, Int64) -> Int) {
        self.size = size
        self.name = name
        self.fill = fill
    }

    /// Bytes in memory (a zip given as bytes, or a mapped file), valid while the input is read.
    init(memory: UnsafeRawBufferPointer, name: String) {
        self.init(size: Int64(memory.count), name: name) { buffer, offset in
            let start = Int(offset)
            let count = max(0, min(buffer.count, memory.count - start))
            if count > 0 { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: memory[start..<(start + count)])) }
            return count
        }
    }

    func read(_ count: Int, at offset: Int64) throws -> [UInt8]? {
        guard count >= 0, offset >= 0, offset <= size, Int64(count) <= size - offset else { return nil }
        if count == 0 { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { fill($0, offset) }
        if got < 0 {
            throw ArchiveError(.io, "cannot read '\(name)': \(String(cString: strerror(Int32(-got))))", errno: Int32(-got))
        }
        return got == count ? bytes : nil
    }
}

/// Small reads served from one 64 KiB read of the file around them: local headers and data descriptors come in
/// file order, a few KiB apart, and one pread each was 800 system calls for two archives of 200 files.
private final class ReadAheadWindow {
    static let size = 64 << 10
    let fill: (UnsafeMutableRawBufferPointer, Int64) -> Int
    var bytes = [UInt8](repeating: 0, count: ReadAheadWindow.size)
    var start: Int64 = 0
    var count = 0

    init(fill: @escaping (UnsafeMutableRawBufferPointer, Int64) -> Int) { self.fill = fill }

    /// As `fill`: the count read (short at the end of the file), or -errno.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int {
        guard buffer.count <= Self.size / 4 else { return fill(buffer, offset) }
        if offset < start || offset + Int64(buffer.count) > start + Int64(count) {
            let got = bytes.withUnsafeMutableBytes { fill($0, offset) }
            guard got >= 0 else { return got }
            (start, count) = (offset, got)
        }
        let available = min(buffer.count, Int(start + Int64(count) - offset))
        guard available > 0 else { return 0 }
        bytes.withUnsafeBytes { window in
            let from = Int(offset - start)
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: window[from..<(from + available)]))
        }
        return available
    }
}

/// Little-endian fields of zip records (`ZipDirectory`, `ZipAssembly`).
extension Array where Element == UInt8 {
    func uint16(_ at: Int) -> UInt16 { UInt16(self[at]) | UInt16(self[at + 1]) << 8 }
    func uint32(_ at: Int) -> UInt32 { UInt32(uint16(at)) | UInt32(uint16(at + 2)) << 16 }
    fileprivate func uint64(_ at: Int) -> UInt64 { UInt64(uint32(at)) | UInt64(uint32(at + 4)) << 32 }

    mutating func storeUInt16(_ value: UInt16, at offset: Int) {
        self[offset] = UInt8(truncatingIfNeeded: value)
        self[offset + 1] = UInt8(truncatingIfNeeded: value >> 8)
    }

    mutating func storeUInt32(_ value: UInt32, at offset: Int) {
        storeUInt16(UInt16(truncatingIfNeeded: value), at: offset)
        storeUInt16(UInt16(truncatingIfNeeded: value >> 16), at: offset + 2)
    }
}
