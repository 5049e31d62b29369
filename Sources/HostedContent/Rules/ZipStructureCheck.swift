import ArchiveIO

/// The `zip.*` rules (docs/rules.md, "Zip structure"): which facts of a zip's central directory and local
/// headers make a package unacceptable, because the zip readers apps use (ZIPFoundation, minizip) or the
/// reference readers (unzip, Python's zipfile, Go's archive/zip) would unpack it differently from hcpack.
///
/// Part of the archive scan, so `verify` and `install` (and anything else that reads a package) get the
/// same problems from the same call.
enum ZipStructureCheck {
    /// What to tell the user for a zip that only another tool could have made.
    static let rebuild = "rebuild the package from its folder with hcpack build"

    /// What reading one entry's data found, for the comparison with its central record.
    struct ReadChecksum {
        /// The entry's position in the order libarchive read the archive, from 0.
        var readIndex: Int
        var crc32: UInt32
        var size: Int64
    }

    /// The zip problems of the archive at `file` (or held in `bytes`): `readRecords`, then `problems(of:)`.
    /// - Throws: `HCPackError` when the file cannot be read (an environment failure, not a finding).
    static func problems(
        file: String?, bytes: [UInt8]?, limits: ArchiveLimits, entriesRead: Int? = nil, checksums: [ReadChecksum]? = nil
    ) throws(HCPackError) -> ProblemList {
        guard let records = try readRecords(file: file, bytes: bytes, limits: limits, keepsChecksums: checksums != nil) else {
            return ProblemList()
        }
        return problems(of: records, entriesRead: entriesRead, checksums: checksums)
    }

    /// A zip's records, read and checked one by one: what needs no scan of the data, so that it can run
    /// beside the scan.
    struct Records: Sendable {
        fileprivate var check: Collector
        fileprivate var directory: ZipDirectory
    }

    /// Reads the central directory and the local headers of the archive at `file` (or held in `bytes`);
    /// nil when there is neither.
    /// - Parameter keepsChecksums: keeps what comparing `ReadChecksum`s needs.
    /// - Throws: `HCPackError` when the file cannot be read (an environment failure, not a finding).
    static func readRecords(
        file: String?, descriptor: Int32? = nil, bytes: [UInt8]?, limits: ArchiveLimits, keepsChecksums: Bool
    ) throws(HCPackError)
        -> Records?
    {
        var check = ZipStructureCheck.Collector()
        check.keepsChecksums = keepsChecksums
        let zipLimits = ZipDirectoryLimits(maxEntries: limits.maxEntries)
        let directory: ZipDirectory
        do {
            if let file {
                directory = try ZipDirectory.read(path: file, descriptor: descriptor, limits: zipLimits) { check.add($0) }
            } else if let bytes {
                directory = try ZipDirectory.read(bytes: bytes, limits: zipLimits) { check.add($0) }
            } else {
                return nil
            }
        } catch let error as ArchiveError {
            let name = file ?? "input"
            if let code = error.errno { throw HCPackError.system("read", path: name, errno: code) }
            throw HCPackError(.io, "\(name): \(error.message)", path: name)
        } catch {
            throw HCPackError(.io, "\(file ?? "input"): \(error)", path: file ?? "input")
        }
        return Records(check: check, directory: directory)
    }

    /// The stored entries whose data a scan may read from the file itself, by their place in libarchive's
    /// reading order (the n-th smallest local header offset, as in `compare`); empty when the records are
    /// damaged or two of them share an offset, when the order cannot be relied on, and when two of these
    /// entries share data bytes (an overlapping zip, refused anyway: no byte is read twice ahead of the scan).
    static func storedDataPlan(of records: Records) -> [Int: StoredDataHashing.Span] {
        let check = records.check
        guard records.directory.defects.isEmpty, !check.storedData.isEmpty else { return [:] }
        let offsets = check.recorded.map(\.offset).sorted()
        for index in offsets.indices.dropFirst() where offsets[index] == offsets[index - 1] { return [:] }
        let data = check.storedData.map { $0.span.dataOffset..<($0.span.dataOffset + $0.span.size) }.sorted { $0.lowerBound < $1.lowerBound }
        for index in data.indices.dropFirst() where data[index].lowerBound < data[index - 1].upperBound { return [:] }
        var plan: [Int: StoredDataHashing.Span] = [:]
        for (offset, span) in check.storedData {
            var low = 0
            var high = offsets.count
            while low < high {
                let middle = (low + high) / 2
                if offsets[middle] < offset { low = middle + 1 } else { high = middle }
            }
            plan[low] = span
        }
        return plan
    }

    /// The zip problems of records read by `readRecords`.
    /// - Parameters:
    ///   - entriesRead: how many entries libarchive read, when it read the whole archive: libarchive silently
    ///     drops central records that point at a local header already seen (how overlapping zips hide files
    ///     that other extractors unpack), so a count below the central directory's is refused.
    ///   - checksums: the CRC-32 and size of each entry's data as read, when libarchive's own CRC-32 check
    ///     was off (`ArchiveReader(checksZipCRC: false)`); each is compared with the central record (and a
    ///     local header that has a CRC-32). Only with `entriesRead`, and records read with `keepsChecksums`.
    static func problems(of records: Records, entriesRead: Int?, checksums: [ReadChecksum]?) -> ProblemList {
        var check = records.check
        let directory = records.directory
        check.finish(directory)
        if let entriesRead, directory.defects.isEmpty, directory.entryCount != entriesRead {
            check.problems.add(
                .corrupt, path: "",
                "the central directory lists \(directory.entryCount) entries but \(entriesRead) could be read: overlapping or hidden entries that other extractors would unpack; rebuild the archive"
            )
        }
        if let entriesRead, let checksums, directory.defects.isEmpty, directory.entryCount == entriesRead {
            check.compare(checksums)
        }
        if let end = directory.end, end.trailingBytes > 0 {
            // Another extractor may find a second archive there.
            check.problems.add(
                .corrupt, path: "",
                "\(end.trailingBytes) bytes follow the end of the zip; other extractors may read them as another archive, rebuild it")
        }
        return check.problems
    }

    /// Checks records as they are read, keeping only what the cross-entry checks need.
    struct Collector {
        var problems = ProblemList()
        /// Each entry's bytes in the file, and its position in the central directory.
        var spans: [(range: Range<UInt64>, index: Int)] = []
        /// Names (without a leading "./" or a trailing "/") for the duplicate check, and the printable names.
        var names = NameIndex()
        /// Whether `recorded` is kept (for `compare`).
        var keepsChecksums = false
        /// Each record's local header offset, CRC-32s and size, in central directory order.
        var recorded: [(offset: UInt64, crc32: UInt32, localCRC32: UInt32, size: UInt64)] = []
        /// The entries whose data a scan may read straight from the file (`StoredDataHashing`), with their local
        /// header offsets; kept with `recorded`.
        var storedData: [(offset: UInt64, span: StoredDataHashing.Span)] = []

        mutating func add(_ entry: ZipEntryFacts) {
            let name = Self.printable(entry.name)
            names.insert(entry)
            if keepsChecksums {
                // 0 in a local header means "in the data descriptor"; any other value is checked too, as libarchive did.
                let localCRC = entry.local?.crc32 ?? 0
                recorded.append((entry.localHeaderOffset, entry.crc32, localCRC, entry.uncompressedSize))
                if let span = StoredDataHashing.Span(entry) { storedData.append((entry.localHeaderOffset, span)) }
            }
            guard let local = entry.local, entry.localHeaderDefect == nil else {
                problems.add(
                    .corrupt, path: name,
                    "the central directory record \(entry.localHeaderDefect ?? "has no local header"); rebuild or download the archive again"
                )
                return
            }
            if let span = entry.span { spans.append((span, entry.index)) }
            if !entry.extra.isWellFormed || !local.extra.isWellFormed {
                problems.add(
                    .corrupt, path: name,
                    "an extra field runs past the end of the \(entry.extra.isWellFormed ? "local" : "central") header's extra area: Python's zipfile refuses the entry, other readers skip the field; \(rebuild)"
                )
            }
            checkName(entry, name: name)
            checkType(entry, name: name)
            checkMethodAndEncryption(entry, local: local, name: name)
            checkLocalHeader(entry, local: local, name: name)
            checkSixtyFour(entry, local: local, name: name)
        }

        /// The data as read against the records. libarchive's zip reader reads entries in the order of their
        /// local headers in the file (it sorts the central records by offset and drops a second record for an
        /// offset, which the caller's entry count has ruled out), so the n-th entry read is the record with the
        /// n-th smallest offset.
        mutating func compare(_ checksums: [ReadChecksum]) {
            let order = recorded.indices.sorted { recorded[$0].offset < recorded[$1].offset }
            for read in checksums where read.readIndex < order.count {
                let index = order[read.readIndex]
                let record = recorded[index]
                let name = names.name(at: index)
                if UInt64(read.size) != record.size {
                    problems.add(
                        .corrupt, path: name,
                        "the entry holds \(read.size) bytes but the central directory says \(record.size); rebuild or download the archive again")
                } else if read.crc32 != record.crc32 || (record.localCRC32 != 0 && read.crc32 != record.localCRC32) {
                    problems.add(
                        .corrupt, path: name,
                        "checksum mismatch: the data's CRC-32 is \(Self.hex(read.crc32)) but the archive records \(Self.hex(record.crc32)); the entry is damaged, rebuild or download the archive again"
                    )
                }
            }
        }

        static func hex(_ value: UInt32) -> String {
            let digits = String(value, radix: 16)
            return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
        }

        /// Backslash, NUL, and names that readers decode differently (bit 11, the Unicode Path field).
        mutating func checkName(_ entry: ZipEntryFacts, name: String) {
            let bytes = entry.name
            if bytes.contains(UInt8(ascii: "\\")) {
                problems.add(
                    .zipUnportableName, path: name,
                    "the name has a backslash: hcpack reads it as a folder separator, other zip readers as part of one file name; use '/' (\(rebuild))"
                )
            }
            if bytes.contains(0) {
                problems.add(
                    .zipUnportableName, path: name,
                    "the name has a NUL byte: some zip readers cut the name there and others do not; rename it (\(rebuild))")
            }
            let nonASCII = bytes.contains { $0 >= 0x80 }
            if nonASCII && !entry.isUTF8 {
                problems.add(
                    .zipUnportableName, path: name,
                    "the name has non-ASCII bytes without the UTF-8 flag (bit 11): readers decode it as CP437 or as raw bytes, each differently; \(rebuild), which marks names UTF-8"
                )
            } else if nonASCII && String(validating: bytes, as: UTF8.self) == nil {
                problems.add(
                    .zipUnportableName, path: name, "the name is flagged UTF-8 but is not valid UTF-8; rename it (\(rebuild))")
            }
            let components = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
            if components.contains(where: { $0.elementsEqual("__MACOSX".utf8) || $0.starts(with: "._".utf8) }) {
                problems.add(
                    .zipAppleDouble, path: name,
                    "a macOS AppleDouble entry (__MACOSX/ or ._*): zip readers unpack it as a file of its own; \(rebuild), which leaves them out"
                )
            }
            for extra in [entry.extra, entry.local?.extra].compactMap({ $0 }) {
                guard let unicode = extra.unicodePath else { continue }
                if unicode.name != bytes || unicode.version != 1 {
                    problems.add(
                        .zipUnicodePathMismatch, path: name,
                        "an Info-ZIP Unicode Path field names it '\(Self.printable(unicode.name))': hcpack and some readers use that name, others the header's; \(rebuild)"
                    )
                    break
                }
            }
        }

        /// hcpack (libarchive) takes an entry's type from its attributes, the other readers from a trailing '/'.
        mutating func checkType(_ entry: ZipEntryFacts, name: String) {
            let unixFolder = entry.unixMode.map { $0 & 0o170000 == 0o040000 } ?? false
            let dosFolder = entry.versionMadeBy >> 8 != 3 && entry.externalAttributes & 0x10 != 0
            if (unixFolder || dosFolder) && !entry.isDirectoryName {
                problems.add(
                    .zipEntryTypeMismatch, path: name,
                    "its attributes say folder but its name does not end with '/': hcpack reads a folder, other zip readers a file; \(rebuild)"
                )
            } else if entry.isDirectoryName && (entry.uncompressedSize > 0 || entry.compressedSize > 0) {
                problems.add(
                    .zipEntryTypeMismatch, path: name,
                    "a folder entry (its name ends with '/') that holds \(entry.uncompressedSize) bytes of data, which readers drop or write differently; \(rebuild)"
                )
            }
        }

        mutating func checkMethodAndEncryption(_ entry: ZipEntryFacts, local: ZipLocalHeader, name: String) {
            let encrypted =
                (entry.flags | local.flags) & 0x0041 != 0 || entry.flags & 0x2000 != 0 || entry.method == 99 || local.method == 99
                || [entry.extra, local.extra].contains {
                    $0.first(ZipDirectory.aesID) != nil || $0.first(ZipDirectory.strongEncryptionID) != nil
                }
            if encrypted {
                problems.add(.encrypted, path: name, "the entry is encrypted; ship hosted content unencrypted (\(rebuild))")
            } else if entry.method != 0 && entry.method != 8 {
                problems.add(
                    .zipUnsupportedMethod, path: name,
                    "compressed with \(Self.methodName(entry.method)): the zip readers apps use read only stored and deflate; \(rebuild)"
                )
            }
        }

        /// The local header must say what the central directory says: readers use one or the other.
        mutating func checkLocalHeader(_ entry: ZipEntryFacts, local: ZipLocalHeader, name: String) {
            var differences: [String] = []
            if local.name != entry.name { differences.append("name '\(Self.printable(local.name))'") }
            if local.method != entry.method {
                differences.append("method \(Self.methodName(local.method)) (central: \(Self.methodName(entry.method)))")
            }
            if (local.flags ^ entry.flags) & 0x0041 != 0 { differences.append("encryption flag") }
            if (local.flags ^ entry.flags) & 0x0800 != 0 && entry.name.contains(where: { $0 >= 0x80 }) {
                differences.append("UTF-8 flag")
            }
            if !local.hasDataDescriptor {
                if local.crc32 != entry.crc32 { differences.append("CRC-32") }
                if local.compressedSize != entry.compressedSize {
                    differences.append("compressed size \(local.compressedSize) (central: \(entry.compressedSize))")
                }
                if local.uncompressedSize != entry.uncompressedSize {
                    differences.append("size \(local.uncompressedSize) (central: \(entry.uncompressedSize))")
                }
            }
            guard !differences.isEmpty else { return }
            problems.add(
                .zipHeaderMismatch, path: name,
                "the local header disagrees with the central directory on the \(differences.joined(separator: ", ")): readers that use one unpack something else than those that use the other; \(rebuild)"
            )
        }

        /// A zip64 field that no 32-bit field needs, one that lacks a value, or a value that fits in 32 bits.
        mutating func checkSixtyFour(_ entry: ZipEntryFacts, local: ZipLocalHeader, name: String) {
            for (header, values) in [("central", entry.zip64), ("local", local.zip64)] {
                guard let values else { continue }
                let fits =
                    [values.uncompressedSize, values.compressedSize, values.localHeaderOffset].contains {
                        ($0 ?? .max) < 0xffff_ffff
                    }
                    || (values.diskStart ?? .max) < 0xffff
                let reason: String? =
                    if values.isMissingValues {
                        "a saturated 32-bit field has no value in the zip64 field"
                    } else if values.surplusBytes > 0 {
                        "the zip64 field holds \(values.surplusBytes) bytes more than its 32-bit fields call for"
                    } else if values.saturatedFields == 0 {
                        "a zip64 field where every value fits in the 32-bit fields"
                    } else if fits { "a zip64 value that fits in its 32-bit field" } else { nil }
                if let reason {
                    problems.add(
                        .zipSixtyFourMismatch, path: name,
                        "the \(header) header has \(reason): zip readers disagree on such records; \(rebuild)")
                    return
                }
            }
        }

        /// The checks across entries and of the end records.
        mutating func finish(_ directory: ZipDirectory) {
            for defect in directory.defects {
                if defect == directory.limitDefect {  // a limit reached is not damage (docs/install.md)
                    problems.add(.limitExceeded, path: "", "\(defect); the archive was not read further")
                } else {
                    problems.add(.corrupt, path: "", "\(defect); rebuild or download the archive again")
                }
            }
            if let end = directory.end, directory.defects.isEmpty, UInt64(directory.entryCount) != directory.declaredEntries {
                problems.add(
                    .corrupt, path: "",
                    "the end record declares \(directory.declaredEntries) entries but the central directory holds \(directory.entryCount) (\(end.centralDirectorySize) bytes); rebuild the archive"
                )
            }
            checkSixtyFourEnd(directory)
            checkOverlaps(directory)
            for (name, isRepeatedFolder) in names.duplicates() where !isRepeatedFolder {
                problems.add(
                    .zipDuplicateName, path: name,
                    "the central directory names this path more than once: readers keep the first, the last, or both; \(rebuild)")
            }
        }

        mutating func checkSixtyFourEnd(_ directory: ZipDirectory) {
            guard let end = directory.end, let sixtyFour = directory.zip64End else { return }
            var reasons: [String] = []
            if !end.isSaturated { reasons.append("the 32-bit end record holds every value, so no zip64 end record is needed") }
            if end.totalEntries != 0xffff && UInt64(end.totalEntries) != sixtyFour.totalEntries {
                reasons.append("the entry counts differ")
            }
            if end.entriesOnDisk != 0xffff && UInt64(end.entriesOnDisk) != sixtyFour.entriesOnDisk {
                reasons.append("the per-disk entry counts differ")
            }
            if end.centralDirectorySize != 0xffff_ffff && UInt64(end.centralDirectorySize) != sixtyFour.centralDirectorySize {
                reasons.append("the central directory sizes differ")
            }
            if end.centralDirectoryOffset != 0xffff_ffff && UInt64(end.centralDirectoryOffset) != sixtyFour.centralDirectoryOffset
            {
                reasons.append("the central directory offsets differ")
            }
            if (end.totalEntries == 0xffff && sixtyFour.totalEntries < 0xffff)
                || (end.centralDirectorySize == 0xffff_ffff && sixtyFour.centralDirectorySize < 0xffff_ffff)
                || (end.centralDirectoryOffset == 0xffff_ffff && sixtyFour.centralDirectoryOffset < 0xffff_ffff)
            {
                reasons.append("a saturated 32-bit field's value fits in it, so the zip64 value is not needed")
            }
            if sixtyFour.adjacentOffset < 0 || sixtyFour.recordOffset != UInt64(sixtyFour.adjacentOffset) {
                reasons.append("the locator points away from the record just before it")
            }
            if sixtyFour.diskNumber != 0 || sixtyFour.centralDirectoryDisk != 0 || sixtyFour.locatorDisk != 0
                || sixtyFour.totalDisks > 1
            {
                reasons.append("it describes a multi-disk archive")
            }
            if sixtyFour.entriesOnDisk != sixtyFour.totalEntries { reasons.append("its entry counts differ") }
            guard !reasons.isEmpty else { return }
            problems.add(
                .zipSixtyFourMismatch, path: "",
                "the zip64 end record disagrees with the end record (\(reasons.joined(separator: "; "))): zip readers disagree on such records; \(rebuild)"
            )
        }

        /// Entries whose bytes overlap or are shared, or run into the central directory.
        mutating func checkOverlaps(_ directory: ZipDirectory) {
            spans.sort { ($0.range.lowerBound, $0.index) < ($1.range.lowerBound, $1.index) }
            var reach: (end: UInt64, index: Int, start: UInt64)?
            var reported: Set<Int> = []
            for span in spans {
                if let previous = reach, span.range.lowerBound < previous.end, reported.insert(span.index).inserted {
                    let shares = span.range.lowerBound == previous.start
                    problems.add(
                        .zipOverlappingEntries, path: names.name(at: span.index),
                        "its bytes \(shares ? "are the same as" : "overlap") those of '\(names.name(at: previous.index))': readers that follow the central directory unpack data that others see once or not at all; \(rebuild)"
                    )
                }
                if reach == nil || span.range.upperBound > (reach?.end ?? 0) {
                    reach = (span.range.upperBound, span.index, span.range.lowerBound)
                }
            }
            if let reach, directory.defects.isEmpty, reach.end > directory.centralDirectoryOffset {
                problems.add(
                    .zipOverlappingEntries, path: names.name(at: reach.index),
                    "its bytes run into the central directory; \(rebuild)")
            }
        }

        static func printable(_ bytes: [UInt8]) -> String {
            PackagePath.printable(String(decoding: bytes, as: UTF8.self))
        }

        static func methodName(_ method: UInt16) -> String {
            switch method {
            case 0: "stored (0)"
            case 8: "deflate (8)"
            case 9: "deflate64 (9)"
            case 12: "bzip2 (12)"
            case 14: "LZMA (14)"
            case 93: "zstd (93)"
            case 95: "xz (95)"
            case 98: "PPMd (98)"
            case 99: "AES encryption (99)"
            default: "method \(method)"
            }
        }
    }

    /// Every central directory name, compact (one byte buffer), for the duplicate check and messages.
    struct NameIndex {
        private var bytes: [UInt8] = []
        /// Start of each name in `bytes`; the name ends where the next starts.
        private var starts: [Int] = []
        private var isFolder: [Bool] = []

        mutating func insert(_ entry: ZipEntryFacts) {
            starts.append(bytes.count)
            isFolder.append(entry.isDirectoryName)
            bytes += entry.name
        }

        func raw(at index: Int) -> ArraySlice<UInt8> {
            guard index >= 0, index < starts.count else { return [] }
            return bytes[starts[index]..<(index + 1 < starts.count ? starts[index + 1] : bytes.count)]
        }

        func name(at index: Int) -> String { Collector.printable(Array(raw(at: index))) }

        /// A name as extractors resolve it: without leading "./" and trailing "/".
        func key(at index: Int) -> ArraySlice<UInt8> {
            var name = raw(at: index)
            while name.starts(with: "./".utf8) { name = name.dropFirst(2) }
            while name.count > 1 && name.last == UInt8(ascii: "/") { name = name.dropLast() }
            return name
        }

        /// Each name that occurs again, once, and whether every occurrence is a folder (harmless).
        func duplicates() -> [(name: String, isRepeatedFolder: Bool)] {
            let order = starts.indices.sorted { key(at: $0).lexicographicallyPrecedes(key(at: $1)) }
            var result: [(String, Bool)] = []
            var run = 0
            while run < order.count {
                var next = run + 1
                while next < order.count && key(at: order[next]) == key(at: order[run]) { next += 1 }
                if next - run > 1 {
                    let positions = order[run..<next].sorted()
                    result.append((name(at: positions[1]), positions.allSatisfy { isFolder[$0] }))
                }
                run = next
            }
            return result
        }
    }
}
