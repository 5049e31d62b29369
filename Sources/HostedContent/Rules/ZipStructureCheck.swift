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
        /// Entries not deflated whose local header sets bit 3 (`Rule.zipStoredDescriptor`): the first one's name and
        /// how many; one warning, not one a file.
        var storedDescriptors: (first: String?, count: Int) = (nil, 0)
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
            checkDescriptor(entry, name: name)
            checkSixtyFour(entry, local: local, name: name)
            // Java's ZipInputStream reads the local header's flags: bit 3 on any method but deflate is refused.
            if local.method != 8 && local.hasDataDescriptor {
                if storedDescriptors.count == 0 { storedDescriptors.first = name }
                storedDescriptors.count += 1
            }
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
                    "the name has non-ASCII bytes without the UTF-8 flag (bit 11): Python's zipfile and unzip decode it as CP437, Go's archive/zip and minizip keep the raw bytes, so each unpacks another name; \(Self.markUTF8)"
                )
            } else if nonASCII && String(validating: bytes, as: UTF8.self) == nil {
                problems.add(
                    .zipUnportableName, path: name, "the name is flagged UTF-8 but is not valid UTF-8: readers replace or keep the bad bytes; rename it (\(rebuild))")
            }
            checkAppleDouble(bytes, name: name)
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

        /// What to do about names without the UTF-8 flag, by producer.
        static let markUTF8 =
            "mark the names UTF-8 (7-Zip: -mcu=on; Python's zipfile, Java, Go and bsdtar in a UTF-8 locale do so themselves; Info-ZIP's zip 3.0 on Linux and macOS Finder do not) or rebuild with hcpack build"

        /// AppleDouble files under Contents/ are content an app would find; elsewhere (Finder's `__MACOSX/` at
        /// the root) they are junk that install leaves out, which the scan reports as `content.junk`.
        mutating func checkAppleDouble(_ bytes: [UInt8], name: String) {
            let components = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
            guard let marker = components.firstIndex(where: { $0.elementsEqual("__MACOSX".utf8) || $0.starts(with: "._".utf8) }),
                components[..<marker].contains(where: { $0.elementsEqual("Contents".utf8) })
            else { return }
            problems.add(
                .zipAppleDouble, path: name,
                "a macOS AppleDouble file (__MACOSX/ or ._*) under Contents/: macOS's Archive Utility turns it into extended attributes, every other reader into a file the app finds among its content; zip without them (on a Mac: xattr -cr on the folder first, or ditto -c -k --norsrc) or \(rebuild), which leaves them out"
            )
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
            } else if entry.isDirectoryName && !Self.isEmptyFolderData(entry) {
                let what =
                    entry.uncompressedSize > 0
                    ? "holds \(entry.uncompressedSize) bytes of data" : "has \(entry.compressedSize) bytes of \(Self.methodName(entry.method)) data"
                problems.add(
                    .zipEntryTypeMismatch, path: name,
                    "a folder entry (its name ends with '/') that \(what): Python's zipfile and unzip make a folder and drop the data, readers that go by the attributes write a file; zip the folder without data in its entry (\(rebuild))"
                )
            }
        }

        /// A folder entry with no data, or an empty deflate stream: what Java's ZipOutputStream (Gradle, Maven,
        /// Android tooling) and Python's `writestr("d/", b"")` in a deflated zip write. Every reader makes a
        /// folder of it. A stream that inflates to nothing is 2 bytes (a final fixed block), 5 as an empty
        /// stored block; with size 0 and CRC-32 0, longer data would be a place to hide bytes.
        static func isEmptyFolderData(_ entry: ZipEntryFacts) -> Bool {
            guard entry.uncompressedSize == 0, entry.crc32 == 0 else { return false }
            return entry.compressedSize == 0 || (entry.method == 8 && entry.compressedSize <= 5)
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
                    "compressed with \(Self.methodName(entry.method)): 7-Zip reads it (Python's zipfile too, for bzip2 and LZMA), but the zip readers apps use (minizip, ZIPFoundation) and Go's read only stored and deflate; zip it with deflate (7-Zip: -mm=Deflate; Python: ZIP_DEFLATED; Info-ZIP zip: without -Z bzip2) or \(rebuild)"
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
                differences += Self.differences(entry, crc32: local.crc32, local.compressedSize, local.uncompressedSize)
            }
            guard !differences.isEmpty else { return }
            problems.add(
                .zipHeaderMismatch, path: name,
                "the local header disagrees with the central directory on the \(differences.joined(separator: ", ")): readers that use one unpack something else than those that use the other; \(rebuild)"
            )
        }

        /// The data descriptor must say what the central record says: Go's archive/zip refuses an entry whose
        /// descriptor has another CRC-32 ("zip: checksum error"), Java's ZipInputStream one whose CRC-32 or sizes
        /// differ from the data.
        mutating func checkDescriptor(_ entry: ZipEntryFacts, name: String) {
            guard let descriptor = entry.descriptor else { return }
            let differences = Self.differences(
                entry, crc32: descriptor.crc32, descriptor.compressedSize, descriptor.uncompressedSize)
            guard !differences.isEmpty else { return }
            problems.add(
                .zipHeaderMismatch, path: name,
                "the data descriptor after the data disagrees with the central directory on the \(differences.joined(separator: ", ")): Go's archive/zip refuses the entry (checksum error), Java's ZipInputStream throws (invalid entry CRC or size); \(rebuild)"
            )
        }

        /// Where a CRC-32 and sizes from a local header or data descriptor differ from the central record's.
        static func differences(_ entry: ZipEntryFacts, crc32: UInt32, _ compressed: UInt64, _ uncompressed: UInt64) -> [String] {
            var differences: [String] = []
            if crc32 != entry.crc32 { differences.append("CRC-32 \(hex(crc32)) (central: \(hex(entry.crc32)))") }
            if compressed != entry.compressedSize {
                differences.append("compressed size \(compressed) (central: \(entry.compressedSize))")
            }
            if uncompressed != entry.uncompressedSize { differences.append("size \(uncompressed) (central: \(entry.uncompressedSize))") }
            return differences
        }

        /// Zip64 fields, decided by what readers do (docs/rules.md): every reader takes the value of a saturated
        /// 32-bit field (0xFFFFFFFF) from the zip64 field, in APPNOTE order, so one without its value is refused,
        /// and so is a central field longer than its saturated fields call for (ZIPFoundation then ignores it).
        /// Values that no saturated field calls for (Python 3.11's force_zip64, `zip -fz`) are harmless when they
        /// are the header's own values wherever a reader takes them: in APPNOTE order, or at their full-layout
        /// places.
        mutating func checkSixtyFour(_ entry: ZipEntryFacts, local: ZipLocalHeader, name: String) {
            let central = entry.extra.first(ZipDirectory.zip64ID)?.data ?? []
            let localField = local.extra.first(ZipDirectory.zip64ID)?.data ?? []
            let headers: [(String, ZipSixtyFourValues?, [UInt8], [UInt64])] = [
                ("central", entry.zip64, central, [entry.uncompressedSize, entry.compressedSize, entry.localHeaderOffset]),
                // With a data descriptor (bit 3) the local sizes are placeholders that no reader uses.
                ("local", local.zip64, localField, local.hasDataDescriptor ? [] : [local.uncompressedSize, local.compressedSize]),
            ]
            // Found by trying: minizip refuses to open such an entry (UNZ_BADZIPFILE), the other readers read it.
            let centralOnly =
                (entry.uncompressedSize32 == 0xffff_ffff && local.uncompressedSize32 != 0xffff_ffff)
                || (entry.compressedSize32 == 0xffff_ffff && local.compressedSize32 != 0xffff_ffff)
            if centralOnly && !local.hasDataDescriptor {
                problems.add(
                    .zipSixtyFourMismatch, path: name,
                    "the central record's size is 0xFFFFFFFF (in its zip64 field) but the local header's is not: minizip refuses to open such an entry (error -103), the other readers read it; \(rebuild)"
                )
                return
            }
            for (header, values, field, expected) in headers {
                guard let values else { continue }
                let reason: String?
                if values.isMissingValues {
                    reason =
                        "a saturated 32-bit field (0xFFFFFFFF) without its value in a zip64 field: Go's archive/zip and Python's zipfile refuse the entry, readers without zip64 take 4 GiB"
                } else if header == "central" && values.saturatedFields > 0 && values.surplusBytes > 0 {
                    reason =
                        "a zip64 field \(values.surplusBytes) bytes longer than its saturated fields call for: ZIPFoundation then ignores the field and takes 0xFFFFFFFF, the other readers take its values"
                } else if (values.saturatedFields == 0 || header == "local"),
                    let slot = Self.disagreeingSlot(field, expected)
                {
                    reason =
                        "a zip64 field whose \(slot) differs from the header's own: readers that take zip64 values in APPNOTE order and those that take them at fixed places unpack different sizes"
                } else {
                    reason = nil
                }
                if let reason {
                    problems.add(.zipSixtyFourMismatch, path: name, "the \(header) header has \(reason); \(rebuild)")
                    return
                }
            }
        }

        /// The first 8-byte value of a zip64 field, read at its full-layout place (uncompressed size, compressed
        /// size, local header offset), that differs from the header's value; nil when all present agree.
        static func disagreeingSlot(_ field: [UInt8], _ expected: [UInt64]) -> String? {
            let names = ["uncompressed size", "compressed size", "local header offset"]
            for (slot, value) in expected.enumerated() where field.count >= (slot + 1) * 8 {
                var read: UInt64 = 0
                for byte in field[(slot * 8)..<(slot * 8 + 8)].reversed() { read = read << 8 | UInt64(byte) }
                if read != value { return "\(names[slot]) \(read) (the header: \(value))" }
            }
            return nil
        }

        /// The checks across entries and of the end records.
        mutating func finish(_ directory: ZipDirectory) {
            if let first = storedDescriptors.first {
                let others = storedDescriptors.count > 1 ? " (and \(storedDescriptors.count - 1) other entries)" : ""
                problems.add(
                    .zipStoredDescriptor, path: first,
                    "stored with its CRC-32 and sizes in a data descriptor (general-purpose bit 3)\(others): Java's ZipInputStream, which Android apps use to unpack downloads, refuses it ('only DEFLATED entries can have EXT descriptor'); unzip, Python's zipfile, Go and minizip read it. To serve such apps, \(ZipStructureCheck.rebuild), which writes no descriptor for stored entries"
                )
            }
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
            checkGaps(directory)
            for (name, isRepeatedFolder) in names.duplicates() where !isRepeatedFolder {
                problems.add(
                    .zipDuplicateName, path: name,
                    "the central directory names this path more than once: readers keep the first, the last, or both; \(rebuild)")
            }
        }

        mutating func checkSixtyFourEnd(_ directory: ZipDirectory) {
            guard let end = directory.end, let sixtyFour = directory.zip64End else { return }
            var reasons: [String] = []
            // A zip64 end record beside an end record that needs none, or a zip64 value that would fit in a
            // saturated field, is read alike (Python reads the zip64 record whenever a locator is there, Go only
            // when a field is saturated): only values that differ make them unpack differently.
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
            if directory.defects.isEmpty && sixtyFour.totalEntries != UInt64(directory.entryCount) {
                reasons.append("it declares \(sixtyFour.totalEntries) entries but the central directory holds \(directory.entryCount)")
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
                "the zip64 end record disagrees with the end record (\(reasons.joined(separator: "; "))): Python's zipfile reads the zip64 record whenever a locator precedes the end record, and the record just before the locator; Go's archive/zip only when a 32-bit field is saturated, and where the locator points; so they list different entries; \(rebuild)"
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

        /// Bytes no entry covers. A local header signature there is refused: streaming readers (libarchive on a
        /// pipe) search for the next signature and unpack an entry there that central-directory readers never
        /// see. Other bytes before an entry are a warning: Java's ZipInputStream stops at them.
        mutating func checkGaps(_ directory: ZipDirectory) {
            var next = 0  // into `spans`, which `checkOverlaps` sorted by start: the gaps come in the same order
            var hiddenReported = 0
            var padding: (count: Int, bytes: UInt64, first: String)?
            for gap in directory.gaps {
                while next < spans.count && spans[next].range.lowerBound < gap.range.lowerBound { next += 1 }
                let before = next > 0 ? names.name(at: spans[next - 1].index) : nil
                let place = before.map { "after '\($0)'" } ?? "before the first entry"
                if let hidden = gap.localHeaderOffset {
                    hiddenReported += 1
                    guard hiddenReported <= 10 else { continue }  // a hostile zip's thousands say nothing more
                    problems.add(
                        .zipOverlappingEntries, path: before ?? "",
                        "a local header at offset \(hidden), in \(gap.range.count) bytes \(place) that no central directory record covers: streaming readers (libarchive on a pipe) unpack an entry there that central-directory readers never see; \(rebuild)"
                    )
                } else if gap.range.upperBound < directory.centralDirectoryOffset {
                    // After the last entry every streaming reader meets the central directory and stops anyway.
                    padding = (
                        (padding?.count ?? 0) + 1, (padding?.bytes ?? 0) + UInt64(gap.range.count),
                        padding?.first ?? place
                    )
                }
            }
            if let padding {
                let stretches = padding.count == 1 ? "" : " in \(padding.count) stretches, the first"
                problems.add(
                    .zipGap, path: "",
                    "\(padding.bytes) bytes\(stretches) \(padding.first) that no central directory record covers: Java's ZipInputStream stops there and silently unpacks none of the entries after them (the other readers skip them); \(rebuild)"
                )
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
