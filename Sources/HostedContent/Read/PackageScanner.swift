import ArchiveIO
import Digest
import Dispatch
import Foundation
import PatchCodec
import PropertyList
import Synchronization


/// Limits for reading untrusted packages.
public struct ReadLimits: Sendable, Equatable {
    public var archive: ArchiveLimits
    public var plist: PlistLimits
    /// Deepest folder nesting walked in a package folder.
    public var maxFolderDepth: Int

    public init(archive: ArchiveLimits = ArchiveLimits(), plist: PlistLimits = PlistLimits(), maxFolderDepth: Int = 128) {
        self.archive = archive
        self.plist = plist
        self.maxFolderDepth = maxFolderDepth
    }
}

/// Reads a package folder or archive into a `PackageSnapshot`, without extracting anything.
public enum PackageScanner {
    /// Scans `path`: a folder is walked, anything else is read as an archive stream.
    /// - Parameter hashFolderFiles: which folder files to hash (archives hash every file: the plist may come last).
    /// - Throws: `HCPackError` when the path cannot be read (missing, permission, I/O).
    public static func scan(
        _ path: String, limits: ReadLimits = ReadLimits(), hashFolderFiles: (String) -> Bool = { _ in false }
    ) throws(HCPackError) -> PackageSnapshot {
        try scan(path, limits: limits, knownPlist: nil, hashFolderFiles: hashFolderFiles)
    }

    /// `scan`, where a folder's ContentInfo.plist that reads as `knownPlist` shares its storage (one copy of
    /// the bytes, not two).
    static func scan(
        _ path: String, limits: ReadLimits, knownPlist: [UInt8]?, hashFolderFiles: (String) -> Bool
    ) throws(HCPackError) -> PackageSnapshot {
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such file or folder; check the path", path: path)
        }
        if status.kind == .directory {
            return try scanFolder(path, limits: limits, knownPlist: knownPlist, hashFiles: hashFolderFiles)
        }
        return try scanArchive(path, limits: limits)
    }

    // MARK: Folders

    /// Walks a package folder with `lstat` (symlinks are reported, never followed).
    public static func scanFolder(
        _ root: String, limits: ReadLimits = ReadLimits(), hashFiles: (String) -> Bool = { _ in false }
    ) throws(HCPackError) -> PackageSnapshot {
        try scanFolder(root, limits: limits, knownPlist: nil, hashFiles: hashFiles)
    }

    static func scanFolder(
        _ root: String, limits: ReadLimits, knownPlist: [UInt8]?, hashFiles: (String) -> Bool
    ) throws(HCPackError) -> PackageSnapshot {
        try scanFolder(root, limits: limits, knownPlist: knownPlist) { hashFiles($0) ? .hash : .head }
    }

    /// How much of a folder's file the scan reads.
    enum FileReading: Sendable {
        /// The first bytes (executables are told apart by them).
        case head
        /// The first bytes and the file's stamp, for a build that hashes the file later, while writing it.
        case headAndStamp
        /// Everything: the SHA-256, and the stamp when the file held still while it was read.
        case hash
        /// Everything, and the CRC-32, which a build's stored zip entry records before its data.
        case hashAndCRC
    }

    static func scanFolder(
        _ root: String, limits: ReadLimits, knownPlist: [UInt8]?, reading: (String) -> FileReading
    ) throws(HCPackError) -> PackageSnapshot {
        var entries: [PackageEntry] = []
        var problems = ProblemList()
        var plistBytes: [UInt8]?
        var pending: [PendingFile] = []

        func walk(_ relative: String, depth: Int) throws(HCPackError) {
            let absolute = relative.isEmpty ? root : root + "/" + relative
            guard depth <= limits.maxFolderDepth else {
                problems.add(.longPath, path: relative, "folders nest deeper than \(limits.maxFolderDepth) levels; flatten the layout")
                return
            }
            for item in try FileSystem.listDirectory(absolute) {
                let path = relative.isEmpty ? item.name : PackagePath.joined(relative, item.name)
                let full = absolute + "/" + item.name
                guard item.isUTF8 else {
                    // Such a name cannot be spelled as a String path: report it, never open or descend into it.
                    let raw = Array((absolute + "/").utf8) + item.nameBytes
                    guard let status = try FileSystem.status(pathBytes: raw) else { continue }
                    entries.append(PackageEntry(path: path, kind: status.kind, size: status.size, permissions: status.permissions, nameIsUTF8: false))
                    continue
                }
                guard let status = try FileSystem.status(full) else { continue }  // vanished meanwhile
                var entry = PackageEntry(
                    path: path, kind: status.kind, size: status.kind == .file ? status.size : 0,
                    permissions: status.permissions, nameIsUTF8: item.isUTF8)
                switch status.kind {
                case .symlink:
                    entry.linkTarget = try FileSystem.readLink(full)
                case .file:
                    if path == ContentInfo.fileName {
                        plistBytes = try readPlist(full, limit: limits.plist.maxBytes, problems: &problems)
                        if let knownPlist, plistBytes == knownPlist { plistBytes = knownPlist }
                    }
                    pending.append(PendingFile(index: entries.count, path: path, reading: reading(path), size: status.size))
                default:
                    break
                }
                entries.append(entry)
                if status.kind == .directory { try walk(path, depth: depth + 1) }
            }
        }
        try walk("", depth: 0)
        for (file, result) in zip(pending, try readAll(pending, root: root)) {
            entries[file.index].executable = result.executable
            entries[file.index].head = result.head
            entries[file.index].patchFrame = result.patchFrame
            if let digest = result.sha256 {
                entries[file.index].sha256 = digest
                entries[file.index].crc32 = result.crc32
                entries[file.index].size = result.size
                entries[file.index].stamp = result.stamp
            } else if let stamp = result.stamp {
                entries[file.index].size = stamp.size
                entries[file.index].stamp = stamp
            }
        }
        return PackageSnapshot(origin: .folder(path: root), entries: entries, contentInfoBytes: plistBytes, scanProblems: problems)
    }

    /// Scans a package held in memory as `scanFolder` scans the folder it would be: its plist, its folders
    /// and its files, each read as `reading` says (`.hash` or `.hashAndCRC`; a file is in memory whole, so
    /// `.head` and `.headAndStamp` read it whole too), without stamps. Entries in path order.
    static func scanMemory(
        _ package: MemoryPackage, origin root: String, limits: ReadLimits, reading: (String) -> FileReading
    ) -> PackageSnapshot {
        var entries: [PackageEntry] = []
        var problems = ProblemList()
        var plist: [UInt8]? = package.plist
        if package.plist.count > limits.plist.maxBytes {
            problems.add(.plistParse, path: ContentInfo.fileName, "ContentInfo.plist is larger than \(limits.plist.maxBytes) bytes; a plist this size is not a content description")
            plist = nil
        }
        var files = package.files
        files[ContentInfo.fileName] = package.plist
        let paths = (Array(files.keys) + Array(package.folders)).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        for path in paths {
            guard let bytes = files[path] else {
                entries.append(PackageEntry(path: path, kind: .directory, permissions: 0o755))
                continue
            }
            var entry = PackageEntry(path: path, kind: .file, size: Int64(bytes.count), permissions: 0o644)
            let choice = reading(path)
            var facts = FactsReader(choice == .hashAndCRC ? .hashAndCRC : .hash, frame: FilePatch.frameExtent(for: path))
            bytes.withUnsafeBytes { facts.feed($0) }
            let found = facts.facts(stamp: nil)
            entry.executable = found.executable
            entry.head = found.head
            // As `read`: a verdict on the whole frame, and a digest, only for a file read whole.
            if choice == .hash || choice == .hashAndCRC {
                entry.patchFrame = found.patchFrame
                entry.sha256 = found.sha256
                entry.crc32 = found.crc32
            }
            entries.append(entry)
        }
        return PackageSnapshot(origin: .folder(path: root), entries: entries, contentInfoBytes: plist, scanProblems: problems)
    }

    private static func readPlist(_ path: String, limit: Int, problems: inout ProblemList) throws(HCPackError) -> [UInt8]? {
        do {
            return try FileSystem.readFile(path, limit: limit)
        } catch where error.code == .invalidRequest {
            problems.add(.plistParse, path: ContentInfo.fileName, "ContentInfo.plist is larger than \(limit) bytes; a plist this size is not a content description")
            return nil
        }
    }

    /// A package folder's contents held in memory (a small delta: `DeltaBuilder`), to build from instead.
    struct MemoryPackage: Sendable {
        /// ContentInfo.plist's bytes.
        var plist: [UInt8]
        /// Regular files by path from the package root ("Contents/a/b").
        var files: [String: [UInt8]]
        /// Folders by path from the package root: every file's parents, and any other the folder would hold.
        var folders: Set<String>
    }

    /// A regular file found by the walk, still to be read.
    struct PendingFile: Sendable {
        var index: Int
        /// Relative to the root (the entry's own string: a full path per file was 100 bytes a file).
        var path: String
        var reading: FileReading
        /// The file's size when listed: how much there is to read.
        var size: Int64 = 0
    }

    /// What reading a file found.
    struct FileFacts: Sendable {
        var executable: ExecutableKind?
        /// The first bytes (`PackageEntry.headLength`) of a file that may be a patch (`PackageEntry.keptHead`).
        var head: [UInt8]?
        /// Whether a file that may be a patch is exactly one zstd frame (read whole only).
        var patchFrame: FrameExtent.Verdict?
        var sha256: [UInt8]?
        /// With `sha256`.
        var crc32: UInt32?
        var size: Int64 = 0
        var stamp: FileStamp?
    }

    /// Reads the files on every core: hashing is CPU-bound (SHA-256 runs at about 1 GB/s a core), so a
    /// second core nearly halves a build's or verify's first pass. Memory: one 1 MiB buffer per worker.
    /// Once `isCancelled` says so, no new file is started (the result is then partial).
    static func readAll(
        _ files: [PendingFile], root: String, isCancelled: @escaping @Sendable () -> Bool = { false }
    ) throws(HCPackError) -> [FileFacts] {
        let slots = ResultSlots<FileFacts>(count: files.count)
        let next = Mutex(0)
        // Up to HashPipeline.inlineBytes in all, this thread alone: a helper thread cost more than it saved.
        let total = files.reduce(Int64(0)) { $0 + $1.size }
        let workers = total <= HashPipeline.inlineBytes ? 1 : min(files.count, max(1, ProcessInfo.processInfo.activeProcessorCount))
        // This thread and workers - 1 threads of hcpack's own (WorkerThread), not concurrentPerform: libdispatch
        // retries a thread it cannot start forever.
        let readFiles: @Sendable () -> Void = {
            while true {
                let index = next.withLock { value -> Int in
                    defer { value += 1 }
                    return value
                }
                guard index < files.count, !slots.failed, !isCancelled() else { return }
                do throws(HCPackError) {
                    let path = root + "/" + files[index].path
                    let frame = FilePatch.frameExtent(for: files[index].path)
                    slots.store(.success(try read(path, files[index].reading, frame: frame)), at: index)
                } catch {
                    slots.store(.failure(error), at: index)
                }
            }
        }
        let helpers = DispatchGroup()
        for number in 1..<max(workers, 1) {
            helpers.enter()
            WorkerThread.start(name: "hcpack-read-\(number)") {
                readFiles()
                helpers.leave()
            }
        }
        readFiles()
        helpers.wait()
        return try slots.values()
    }

    /// Reads a file once: its first bytes tell executables apart, and its SHA-256 is computed when asked.
    private static func read(_ path: String, _ reading: FileReading, frame patchFrame: FrameExtent?) throws(HCPackError) -> FileFacts {
        let keepsHead = patchFrame != nil
        let file = try OpenFile(reading: path)
        if reading == .head || reading == .headAndStamp {
            let stamp = reading == .headAndStamp ? try file.stamp() : nil
            var head = [UInt8](repeating: 0, count: PackageEntry.headLength)
            let count = try Descriptor.read(file.descriptor, into: &head, path: path)
            head.removeSubrange(count...)
            return FileFacts(executable: head.withUnsafeBytes { ExecutableKind.detect($0) }, head: keepsHead ? head : nil, stamp: stamp)
        }
        let stamp = try file.stamp()
        var facts = FactsReader(reading, frame: patchFrame)
        try file.readChunks { (chunk: UnsafeRawBufferPointer) throws(HCPackError) in facts.feed(chunk) }
        // Written to while we read: no stamp, so a build refuses to trust the digest.
        let settled = try file.stamp() == stamp && stamp.size == facts.total
        return facts.facts(stamp: settled ? stamp : nil)
    }

    /// What `read` finds in a file's bytes, fed chunk by chunk (`.hash` or `.hashAndCRC`).
    struct FactsReader {
        private let keepsHead: Bool
        private let withCRC: Bool
        private var head: [UInt8] = []
        private(set) var total: Int64 = 0
        private var frame: FrameExtent
        private var crc32: UInt32 = 0
        private let hasher = Digest.Hasher(.sha256)

        init(_ reading: FileReading, frame patchFrame: FrameExtent?) {
            keepsHead = patchFrame != nil
            withCRC = reading == .hashAndCRC
            frame = patchFrame ?? FrameExtent()
        }

        mutating func feed(_ chunk: UnsafeRawBufferPointer) {
            if head.count < PackageEntry.headLength { head += chunk.prefix(PackageEntry.headLength - head.count) }
            if keepsHead { frame.feed(chunk) }
            hasher.update(chunk)
            if withCRC { crc32 = CRC32.update(crc32, with: chunk) }
            total += Int64(chunk.count)
        }

        func facts(stamp: FileStamp?) -> FileFacts {
            FileFacts(
                executable: head.withUnsafeBytes { ExecutableKind.detect($0) }, head: keepsHead ? head : nil,
                patchFrame: keepsHead ? frame.verdict : nil, sha256: hasher.finalize(), crc32: withCRC ? crc32 : nil, size: total,
                stamp: stamp)
        }
    }

    // MARK: Archives

    /// Streams an archive once: names are checked, every file is hashed, ContentInfo.plist is kept in memory.
    public static func scanArchive(_ path: String, limits: ReadLimits = ReadLimits()) throws(HCPackError) -> PackageSnapshot {
        try readArchive(path, limits: limits, staging: nil)
    }

    /// Scans an archive held in memory, exactly as `scanArchive(_:limits:)` scans a file.
    ///
    /// For archives that arrive over the network (and for fuzzing); the snapshot's origin is
    /// `.archive(path: name, ...)`.
    /// - Parameters:
    ///   - bytes: the whole archive; nothing in it is trusted.
    ///   - name: how the snapshot and messages name the input.
    /// - Throws: `HCPackError` only when the reader cannot be set up (out of memory); damaged or hostile
    ///   archives give a snapshot with problems instead.
    public static func scanArchive(
        bytes: [UInt8], name: String = "input", limits: ReadLimits = ReadLimits()
    ) throws(HCPackError) -> PackageSnapshot {
        try readArchive(origin: name, file: nil, bytes: bytes, limits: limits, staging: nil) { () throws(ArchiveError) in
            try ArchiveReader(bytes: bytes, limits: limits.archive, checksZipCRC: false)
        }
    }

    /// Streams an archive once, like `scanArchive`, and also writes every entry that may be a content file
    /// into `staging` as it streams (install). Conflicts found while staging join the snapshot's problems.
    /// - Throws: `HCPackError` when the archive cannot be read or staging fails (disk full, permission).
    /// - Parameter waitsForZipRecords: see `StoredDataScan` (tests).
    /// - Parameter descriptor: the archive, already open (a signed read: see `SignedArchive`); every reader of
    ///   this scan reads it, never `path` again.
    static func readArchive(
        _ path: String, limits: ReadLimits, staging: StagingArea?, waitsForZipRecords: Bool = false, descriptor: Int32? = nil
    ) throws(HCPackError) -> PackageSnapshot {
        try readArchive(
            origin: path, file: path, descriptor: descriptor, limits: limits, staging: staging,
            waitsForZipRecords: waitsForZipRecords
        ) { () throws(ArchiveError) in
            try ArchiveReader(path: path, descriptor: descriptor, limits: limits.archive, checksZipCRC: false)
        }
    }

    /// As `readArchive(_:limits:staging:)`, reading on from `reader`, opened on `path` with `limits.archive`
    /// and without CRC checks, whose first entry (`first`: its header and all its data) the caller has read:
    /// a delta peeks at both plists before either archive is read, and one open and one read serve both.
    static func readArchive(
        _ path: String, limits: ReadLimits, staging: StagingArea?, continuing reader: ArchiveReader,
        first: (header: ArchiveEntry, data: [UInt8])
    ) throws(HCPackError) -> PackageSnapshot {
        try readArchive(origin: path, file: path, limits: limits, staging: staging, first: first) { () throws(ArchiveError) in reader }
    }

    /// The one archive scan every entry point shares; `open` makes the reader, `file` is the archive's path
    /// when it is a file and `bytes` the archive when it is in memory (for the zip structure checks).
    ///
    /// A zip's CRC-32s are checked here, not by libarchive (`checksZipCRC: false`): computed where there is
    /// time for them (`ArchiveCollector.Checksummer`), compared by `ZipStructureCheck` with the central
    /// directory.
    private static func readArchive(
        origin path: String, file: String?, descriptor: Int32? = nil, bytes: [UInt8]? = nil, limits: ReadLimits, staging: StagingArea?,
        waitsForZipRecords: Bool = false, first: (header: ArchiveEntry, data: [UInt8])? = nil,
        open: () throws(ArchiveError) -> ArchiveReader
    ) throws(HCPackError) -> PackageSnapshot {
        let reader: ArchiveReader
        do {
            reader = try open()
        } catch where error.code == .io || error.code == .usage {
            throw environmentError(error, path: path)
        } catch {
            // Not an archive we read at all: a finding about the input, not an environment failure.
            var problems = ProblemList()
            switch error.code {
            case .unsupportedFormat:
                problems.add(.unsupportedFormat, path: "", "\(error.message); hcpack reads zip and tar (plain, gzip, bzip2, xz, zstd) archives")
            case .nestedCompression:
                problems.add(.nestedCompression, path: "", error.message)
            default:
                problems.add(.corrupt, path: "", "\(error.message); rebuild or download the archive again")
            }
            return PackageSnapshot(
                origin: .archive(path: path, format: "unknown"), entries: [], contentInfoBytes: nil, scanProblems: problems,
                isComplete: false)
        }
        // A zip's records are read and checked beside the scan; the verdict joins them at the end. A small
        // archive is read on this thread alone.
        let inline = (reader.inputSize ?? .max) <= HashPipeline.inlineBytes
        let zipRecords = reader.isZip
            ? BackgroundResult(inline: inline) { () throws(HCPackError) in
                try ZipStructureCheck.readRecords(
                    file: file, descriptor: descriptor, bytes: bytes, limits: limits.archive, keepsChecksums: true)
            } : nil
        // The caller closes its descriptor once this returns: the records' reader is done with it by then.
        defer { if descriptor != nil { _ = zipRecords?.outcome() } }
        var collector = ArchiveCollector(
            plistLimit: limits.plist.maxBytes, checksums: reader.isZip, writesFiles: staging != nil, inline: inline)
        // Large stored entries are read (and staged) beside libarchive (see StoredDataHashing).
        if let zipRecords, let descriptor = reader.seekableDescriptor {
            collector.storedData = StoredDataScan(
                records: zipRecords, descriptor: descriptor, path: path, waitsForRecords: waitsForZipRecords)
        }
        // Whatever way this ends, the pipeline's workers are done before the caller removes staging, and the
        // stored-data threads before the reader closes the file.
        defer {
            _ = collector.hashes.finish()
            collector.storedData?.stop()
        }
        var complete = true
        do {
            if let first { try collector.add(first.header, reader: reader, staging: staging, prefetched: first.data) }
            while let header = try reader.next() {
                try collector.add(header, reader: reader, staging: staging)
            }
        } catch let error as HCPackError {
            throw error  // staging failed: the environment, not the package
        } catch let error as ArchiveError {
            complete = false
            switch error.code {
            case .io: throw environmentError(error, path: path)
            case .unsupportedFormat:
                collector.problems.add(
                    .unsupportedFormat, path: "",
                    "\(error.message); hcpack reads zip and tar (plain, gzip, bzip2, xz, zstd) archives")
            case .nestedCompression:
                collector.problems.add(.nestedCompression, path: "", error.message)
            case .stalled:
                collector.problems.add(.stalled, path: collector.currentName, error.message)
            case .limitExceeded:
                let rule: Rule = error.message.contains("ratio") ? .compressionRatio : .limitExceeded
                collector.problems.add(rule, path: collector.currentName, "\(error.message); the archive was not read further")
            case .encrypted:
                collector.problems.add(.encrypted, path: collector.currentName, "the entry is encrypted; ship hosted content unencrypted")
            case .corrupt, .usage:
                collector.problems.add(.corrupt, path: collector.currentName, "\(error.message); rebuild or download the archive again")
            }
        } catch {
            complete = false
            collector.problems.add(.corrupt, path: collector.currentName, "\(error)")
        }
        try collector.joinStoredData()
        if let staging {
            // Staged files are written on the hashing thread: wait for the last ones, and fail as staging would.
            try collector.hashes.finishWriting()
            collector.problems.append(contentsOf: staging.problems)
        }
        let format = reader.formatName ?? "unknown"
        if let zipRecords, let records = try zipRecords.value() {
            // One verdict for every zip reader: the zip.* rules, from the central directory and local headers.
            let found = ZipStructureCheck.problems(
                of: records, entriesRead: complete ? collector.entriesRead : nil, checksums: collector.readChecksums())
            let reported = Set(collector.problems.problems.map { "\($0.rule.rawValue) \($0.path)" })
            for problem in found.problems where !reported.contains("\(problem.rule.rawValue) \(problem.path)") {
                collector.problems.add(problem.rule, path: problem.path, problem.message)
            }
        }
        var snapshot = collector.snapshot(path: path, format: format, complete: complete)
        snapshot.entriesReadBeside = collector.storedFiles.count
        return snapshot
    }

    private static func environmentError(_ error: ArchiveError, path: String) -> HCPackError {
        if error.code == .io, let code = error.errno { return HCPackError.system("read", path: path, errno: code) }
        if error.code == .io { return HCPackError(.io, "\(path): \(error.message)", path: path) }
        return HCPackError(.invalidPackage, "\(path): \(error.message)", path: path)
    }
}

/// Gathers archive entries with archive-root-relative names, then picks the package root.
struct ArchiveCollector {
    let plistLimit: Int
    var entries: [PackageEntry] = []
    /// Position of each name in `entries`, compared byte for byte.
    var indexByPath = PositionIndex()
    var problems = ProblemList()
    /// ContentInfo.plist candidates by archive path ("ContentInfo.plist" or "X/ContentInfo.plist").
    var plistCandidates: [String: [UInt8]] = [:]
    var oversizedPlists: Set<String> = []
    var currentName = ""
    /// Every header read, including refused and duplicate ones.
    var entriesRead = 0
    /// Hashes file data (and writes staged files) on other threads while this one reads and decompresses.
    let hashes: HashPipeline
    /// The hash ticket of each entry that has one, in entry order.
    var hashTickets: [(entry: Int, ticket: Int)] = []
    /// Every file entry whose data was read whole: its position among the headers read, its ticket, its size.
    var readFiles: [(readIndex: Int, ticket: Int, size: Int64)] = []
    /// Where each file's CRC-32 is computed (a zip's, whose CRC-32s libarchive does not check); nil: nowhere.
    let checksummer: Checksummer?
    /// The CRC-32 of each of `readFiles`, when this thread computes them.
    var ownChecksums: [UInt32] = []
    /// Reads large stored entries beside libarchive; nil when libarchive reads every entry.
    var storedData: StoredDataScan?
    /// The entries `storedData` reads: where each is in `entries` (nil for a repeated name), its place among
    /// the headers read, its span and size.
    var storedFiles: [(entry: Int?, readIndex: Int, span: Int, size: Int64)] = []
    /// The CRC-32 and size of each of `storedFiles`, once joined.
    var storedChecksums: [ZipStructureCheck.ReadChecksum] = []

    enum Checksummer {
        /// The reading thread, over the bytes it has just read (verify: the thread waits on the hashing for
        /// most of a package of media, and the bytes are in its cache; on another core the same CRC-32 cost
        /// half as much again).
        case readingThread
        /// The pipeline's writing worker (install: inflating and staging thousands of small files keeps the
        /// reading thread busy).
        case writingWorker
    }

    /// - Parameters:
    ///   - checksums: computes each file's CRC-32 (a zip, whose CRC-32s libarchive does not check).
    ///   - writesFiles: staged files are written, on a thread of their own (install).
    ///   - inline: the pipeline hashes and writes on the reading thread instead (a small archive).
    init(plistLimit: Int, checksums: Bool = false, writesFiles: Bool = false, inline: Bool = false) {
        self.plistLimit = plistLimit
        checksummer = checksums ? (writesFiles ? .writingWorker : .readingThread) : nil
        hashes = HashPipeline(
            writer: writesFiles ? .ownThread : .hashingThread, checksums: checksummer == .writingWorker, inline: inline)
    }

    /// The CRC-32 and size of every file entry read whole; waits for the pipeline. Empty without `checksums`.
    /// Those of entries read beside libarchive (`storedChecksums`) included, whichever thread checksummed the rest.
    func readChecksums() -> [ZipStructureCheck.ReadChecksum] {
        let read: [ZipStructureCheck.ReadChecksum]
        switch checksummer {
        case nil:
            return []
        case .readingThread:
            read = zip(readFiles, ownChecksums).map { file, crc in
                ZipStructureCheck.ReadChecksum(readIndex: file.readIndex, crc32: crc, size: file.size)
            }
        case .writingWorker:
            let checksums = hashes.checksums()
            read = readFiles.compactMap { file in
                file.ticket < checksums.count
                    ? ZipStructureCheck.ReadChecksum(readIndex: file.readIndex, crc32: checksums[file.ticket], size: file.size)
                    : nil
            }
        }
        return read + storedChecksums
    }

    /// Records one entry; a regular file's data is hashed and, when `staging` wants it, written there.
    /// - Parameter prefetched: the entry's data, already read from `reader` by the caller (`readArchive`'s `first`).
    mutating func add(_ header: ArchiveEntry, reader: ArchiveReader, staging: StagingArea? = nil, prefetched: [UInt8]? = nil) throws {
        entriesRead += 1
        let raw = header.path ?? String(decoding: header.pathBytes, as: UTF8.self)
        let name = PackagePath.normalizeArchiveName(raw)
        currentName = name
        if name.isEmpty || name == "." { return }  // the "./" entry tar writes for the root folder
        if let reason = PackagePath.unsafeArchiveNameReason(name) {
            problems.add(.unsafePath, path: PackagePath.printable(raw), "unsafe entry name (\(reason)); an extractor could write outside its folder")
            return
        }
        var entry = PackageEntry(
            path: name, kind: Self.kind(header.kind), size: header.declaredSize ?? 0, permissions: header.permissions,
            linkTarget: header.linkTarget, nameIsUTF8: header.path != nil)
        let earlier = position(of: name)
        let keepsInMemory = entry.kind == .file && !header.isEncrypted && earlier == nil
            && staging?.keepsInMemory(name, declaredSize: header.declaredSize) == true
        if header.isEncrypted {
            problems.add(.encrypted, path: name, "the entry is encrypted; ship hosted content unencrypted")
        } else if entry.kind == .file, earlier == nil, header.declaredSize != nil, staging?.leavesUnread(name) == true {
            // Data the caller needs nothing of: libarchive skips it (a seek in a zip); no digest, no checksum.
            entry.dataUnread = true
        } else if entry.kind == .file, !Self.isPlistCandidate(name), !keepsInMemory,
            let stored = storedData?.span(forRead: entriesRead - 1, name: header.pathBytes, declaredSize: header.declaredSize)
        {
            try reader.leaveData(toCaller: Int64(stored.size))
            entry.size = Int64(stored.size)
            // A second entry with this name is never staged, as below.
            if let staging, earlier == nil, let open = staging.opener(forFile: name) {
                storedData?.copy(span: stored.index, opening: open)
                staging.countStaged(bytes: entry.size)
            }
            storedFiles.append((earlier == nil ? entries.count : nil, entriesRead - 1, stored.index, entry.size))
        } else if entry.kind == .file {
            // A few candidates at most: more than one already means more than one package.
            let isPlist = Self.isPlistCandidate(name) && plistCandidates.count < 4
            let hashes = self.hashes
            var head: [UInt8] = []
            var frame = FilePatch.frameExtent(for: name)
            var plist: [UInt8] = []
            var plistTooBig = false
            let limit = plistLimit
            if isPlist, let declared = header.declaredSize, declared > 0, declared <= limit { plist.reserveCapacity(Int(declared)) }
            // A second entry with this name is never staged: the first one's data would be overwritten.
            let writer = earlier == nil && !keepsInMemory ? staging?.beginFile(name, through: hashes) : nil
            // At most the declared size (StagingArea.largestKeptBytes): the reader refuses more.
            var kept: [UInt8]? = keepsInMemory ? [] : nil
            if keepsInMemory, let declared = header.declaredSize { kept?.reserveCapacity(Int(declared)) }
            let checksumsHere = checksummer == .readingThread
            var crc: UInt32 = 0
            let count = try Self.read(prefetched, from: reader) { chunk in
                if head.count < PackageEntry.headLength { head += chunk.prefix(PackageEntry.headLength - head.count) }
                frame?.feed(chunk)
                if let writer {
                    writer.write(chunk)
                } else if checksumsHere {
                    hashes.update(chunk, crc: &crc)
                } else {
                    hashes.update(chunk)
                }
                kept?.append(contentsOf: chunk)
                if isPlist && !plistTooBig {
                    if plist.count + chunk.count > limit { plistTooBig = true; plist = [] } else { plist += chunk }
                }
            }
            try writer?.finish()
            if let kept { staging?.keep(name, kept) }
            entry.size = count
            let ticket = hashes.end()
            if earlier == nil { hashTickets.append((entries.count, ticket)) }
            readFiles.append((entriesRead - 1, ticket, count))
            if checksumsHere { ownChecksums.append(crc) }
            entry.executable = head.withUnsafeBytes { ExecutableKind.detect($0) }
            entry.head = PackageEntry.keptHead(head, name: name)
            entry.patchFrame = frame?.verdict
            if isPlist {
                if plistTooBig { oversizedPlists.insert(name) } else { plistCandidates[name] = plist }
                if !plistTooBig && earlier == nil { staging?.plistRead(name, plist) }
            }
        }
        if let existing = earlier {
            // Repeated folder entries are harmless; anything else means two different contents for one name.
            if !(entries[existing].kind == .directory && entry.kind == .directory) {
                problems.add(.duplicateEntry, path: name, "the archive has this name twice; an extractor would keep only one of them")
            }
            return
        }
        // `earlier` is nil here, so no stored name equals this one.
        indexByPath.insert(entries.count, hash: PositionIndex.exactHash(name)) { _ in false }
        entries.append(entry)
    }

    /// The entry's data, in chunks, from `prefetched` when the caller read it already, else from `reader`.
    private static func read(_ prefetched: [UInt8]?, from reader: ArchiveReader, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int64 {
        guard let prefetched else { return try reader.readData(body) }
        try prefetched.withUnsafeBytes { try body($0) }
        return Int64(prefetched.count)
    }

    /// Waits for the entries `storedData` reads: their digests, executable kinds and checksums.
    /// Throws when the archive could not be read (an environment failure).
    mutating func joinStoredData() throws(HCPackError) {
        guard let storedData, let last = storedFiles.map(\.span).max() else { return }
        // A scan that ended early waits only for the entries it reached.
        let outcomes = try storedData.outcomes(before: last + 1)
        for file in storedFiles {
            guard file.span < outcomes.count, let outcome = outcomes[file.span] else {
                throw HCPackError(.io, "the data of entry \(file.readIndex + 1) was not read; report this as a bug")
            }
            if let index = file.entry {
                entries[index].sha256 = outcome.sha256
                entries[index].executable = outcome.head.withUnsafeBytes { ExecutableKind.detect($0) }
                entries[index].head = PackageEntry.keptHead(outcome.head, name: entries[index].path)
                entries[index].patchFrame = outcome.frame
            }
            storedChecksums.append(ZipStructureCheck.ReadChecksum(readIndex: file.readIndex, crc32: outcome.crc32, size: file.size))
        }
    }

    /// Where `name` is in `entries`, if it is there.
    func position(of name: String) -> Int? {
        indexByPath.find(exactly: name) { entries[$0].path }
    }

    /// The first component of `path`, as `prefix(while: { $0 != "/" })` finds it. Over the bytes when the
    /// bytes before the first slash and the one after it are ASCII: each is then a Character of its own, so
    /// the slash is too (a combining mark after it would join it). Called for every entry.
    static func topLevelName(_ path: String) -> String {
        var copy = path
        let ascii = copy.withUTF8 { bytes -> String? in
            var end = 0
            while end < bytes.count && bytes[end] != UInt8(ascii: "/") {
                if bytes[end] >= 0x80 { return nil }
                end += 1
            }
            if end + 1 < bytes.count && bytes[end + 1] >= 0x80 { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[..<end]), as: UTF8.self)
        }
        return ascii ?? String(path.prefix(while: { $0 != "/" }))
    }

    static func isPlistCandidate(_ name: String) -> Bool {
        // Called for every entry: a byte comparison of the end first, the split only for the few that match.
        let trimmed = name.utf8.reversed().drop(while: { $0 == UInt8(ascii: "/") })
        guard trimmed.starts(with: plistNameReversed) else { return false }
        let parts = name.split(separator: "/")
        return parts.last == Substring(ContentInfo.fileName) && parts.count <= 2
    }

    private static let plistNameReversed = Array(ContentInfo.fileName.utf8.reversed())

    static func kind(_ kind: ArchiveEntryKind) -> EntryKind {
        switch kind {
        case .file: .file
        case .directory: .directory
        case .symlink: .symlink
        case .hardlink: .hardlink
        case .characterDevice, .blockDevice: .device
        case .fifo: .fifo
        case .socket: .socket
        case .unknown: .unknown
        }
    }

    /// The package root is the archive root, or its single top-level folder (junk such as __MACOSX aside).
    mutating func snapshot(path: String, format: String, complete: Bool) -> PackageSnapshot {
        let digests = hashes.finish()
        for (index, ticket) in hashTickets where ticket < digests.count { entries[index].sha256 = digests[ticket] }
        hashTickets = []
        let topLevel = Set(entries.map { Self.topLevelName($0.path) })
        let meaningful = topLevel.filter { !PackagePath.isJunk($0) }
        var root: String?
        if topLevel.contains(ContentInfo.fileName) || topLevel.contains("Contents") {
            root = nil
        } else {
            let withPlist = meaningful.filter { position(of: $0 + "/" + ContentInfo.fileName) != nil }.sorted()
            if withPlist.count > 1 {
                problems.add(
                    .multipleRoots, path: "",
                    "the archive holds \(withPlist.count) packages (\(withPlist.joined(separator: ", "))); ship one package per archive")
                root = withPlist.first
            } else if let only = withPlist.first {
                root = only
            } else if meaningful.count == 1, let only = meaningful.first {
                root = only
            } else if meaningful.count > 1 {
                problems.add(
                    .multipleRoots, path: "",
                    "no ContentInfo.plist at the archive root or in a single top-level folder (found \(meaningful.sorted().prefix(5).joined(separator: ", "))); put ContentInfo.plist and Contents/ at the archive root")
            }
        }
        // Rerooted in place: a second array of entries was 3 MB at 26,000 files.
        var rooted = entries
        entries = []
        indexByPath = PositionIndex()
        var kept = 0
        let prefix = root.map { $0 + "/" } ?? ""
        var junkReported: Set<String> = []
        for index in rooted.indices {
            var entry = rooted[index]
            if let root {
                if entry.path == root { continue }
                guard entry.path.hasPrefix(prefix) else {
                    if PackagePath.isJunk(entry.path) {
                        // Once per top-level name: Finder's __MACOSX/ holds a file for each file with attributes.
                        let top = Self.topLevelName(entry.path)
                        if junkReported.insert(top).inserted {
                            problems.add(.junk, path: top, "operating system junk outside the package folder, which install never places; leave it out of the archive")
                        }
                    } else if !entry.path.utf8.contains(UInt8(ascii: "/")) {
                        problems.add(.strayEntry, path: entry.path, "outside the package folder '\(root)'; installers ignore it, so leave it out")
                    }
                    continue
                }
                entry.path.removeFirst(prefix.count)
            }
            if entry.kind == .hardlink, let target = entry.linkTarget {
                // Hard link targets name archive entries; make them package-relative (nil target: outside).
                let normalized = PackagePath.normalizeArchiveName(target)
                entry.linkTarget = normalized.hasPrefix(prefix) ? String(normalized.dropFirst(prefix.count)) : "/" + normalized
            }
            rooted[kept] = entry
            kept += 1
        }
        rooted.removeSubrange(kept...)
        let plistKey = prefix + ContentInfo.fileName
        if oversizedPlists.contains(plistKey) {
            problems.add(.plistParse, path: ContentInfo.fileName, "ContentInfo.plist is larger than \(plistLimit) bytes; a plist this size is not a content description")
        }
        return PackageSnapshot(
            origin: .archive(path: path, format: format), rootFolder: root, entries: rooted,
            contentInfoBytes: plistCandidates[plistKey], scanProblems: problems, isComplete: complete)
    }
}
