import ArchiveIO
import Digest
import Dispatch
import FileSystemIO
import Foundation
import PatchCodec
import Synchronization

/// Hashes (SHA-256 and CRC-32) the data of a zip's large stored entries straight from the archive file, one
/// thread per core, while the scan's reading thread goes on with the other entries; for install, also copies
/// each one the scan stages into its staged file (`copy`).
///
/// libarchive reads one entry after another on one thread: the media of a package (stored, most of its bytes)
/// waited behind the inflating of its small files, and then kept that thread busy mapping, copying and
/// checksumming while the other core had little to do (bench/README.md). A stored entry's data is the bytes
/// between its local header and its end, exactly what every extractor copies out, so these threads read it
/// with `pread` from the moment the zip's records are known, and the reading thread lets libarchive seek past
/// it (`ArchiveReader.leaveData`). The records' checks (`ZipStructureCheck`) and the comparison of each CRC-32
/// and size with the central directory apply to these entries as to every other.
final class StoredDataHashing: @unchecked Sendable {
    // @unchecked: outcomes, the failure and the copies sit behind mutexes; `waited` is the scan thread's; the
    // rest is set in `init` and not changed.

    /// A stored entry's data in the archive file.
    struct Span: Sendable {
        var dataOffset: UInt64
        var size: UInt64
        /// The name in the central directory: the scan takes the span only for the entry libarchive names so.
        var name: [UInt8]
        /// For an entry that may be a delta's patch, the walk of its zstd frames (`FilePatch.frameExtent`).
        var frame: FrameExtent?

        /// The data of `entry` when it is stored, unencrypted, whole, and large enough to be worth a thread;
        /// nil otherwise (libarchive reads it as before).
        init?(_ entry: ZipEntryFacts) {
            guard let local = entry.local, entry.localHeaderDefect == nil, entry.span != nil else { return nil }
            let encryption: UInt16 = 0x0041  // bit 0, and bit 6 (strong encryption)
            guard entry.method == 0, local.method == 0, entry.flags & encryption == 0, local.flags & encryption == 0,
                entry.compressedSize == entry.uncompressedSize, entry.uncompressedSize >= Self.minimumBytes,
                !entry.isDirectoryName
            else { return nil }
            dataOffset = local.dataOffset
            size = entry.compressedSize
            name = entry.name
            frame = FilePatch.frameExtent(for: String(decoding: entry.name, as: UTF8.self))
        }

        /// Smaller entries cost more to hand over than to read on the scan's own thread.
        static let minimumBytes: UInt64 = 64 << 10
    }

    /// What reading one span found.
    struct Outcome: Sendable {
        var sha256: [UInt8]
        var crc32: UInt32
        /// The first bytes (`PackageEntry.headLength`), for the executable check and a patch's frame header.
        var head: [UInt8]
        /// For a span that may be a patch: whether its bytes are exactly one zstd frame; nil for any other.
        var frame: FrameExtent.Verdict?
    }

    private static let chunkSize = 1 << 20
    private let spans: [Span]
    private let file: PositionedFile
    private let nextSpan = Atomic<Int>(0)
    /// Spans from here on are not read (a scan that ended early needs only those it reached).
    private let spanLimit: Atomic<Int>
    private let cancelled = Atomic<Bool>(false)
    private let shared: Mutex<(outcomes: [Outcome?], failure: HCPackError?)>
    private let stopped = DispatchSemaphore(value: 0)
    private let threadCount: Int
    private var waited = false
    /// Spans to copy into staged files (install), and whether more may come.
    private let copies = Mutex<(queue: [(span: Int, open: HashPipeline.Opener)], closed: Bool)>(([], false))
    /// Signalled once per copy queued, and once per thread when no more will come. Made at 0: libdispatch
    /// traps when a semaphore is freed below its initial value.
    private let copyQueued = DispatchSemaphore(value: 0)

    /// Starts reading `spans` of the file open as `descriptor` in their order. The descriptor becomes this
    /// object's (a duplicate of the reader's, so that neither outlives the other's file), closed in `deinit`.
    init(spans: [Span], descriptor: Int32, path: String) {
        self.spans = spans
        file = PositionedFile(descriptor: descriptor, path: path)
        shared = Mutex((Array(repeating: nil, count: spans.count), nil))
        spanLimit = Atomic(spans.count)
        threadCount = spans.isEmpty ? 0 : max(1, min(ProcessInfo.processInfo.activeProcessorCount, spans.count))
        for index in 0..<threadCount {
            WorkerThread.start(name: "hcpack-stored-\(index)") { [self] in
                work()
                stopped.signal()
            }
        }
    }

    /// The threads hold this object until they end, so they are done with the file here.
    deinit { Descriptor.release(file.descriptor) }

    /// Copies span `index` into the staged file `open` creates, once the scan has decided to stage it: in the
    /// kernel (`Descriptor.copyRange`), while the span's digests are computed apart. A failure (disk full)
    /// fails the scan, as the pipeline's writes do.
    func copy(span index: Int, opening open: @escaping HashPipeline.Opener) {
        copies.withLock { $0.queue.append((index, open)) }
        copyQueued.signal()
    }

    /// Waits for the threads to read the spans before `limit` and make the copies asked for; each span's
    /// outcome, by its place in `spans` (nil past `limit`). Throws the first failure.
    func outcomes(before limit: Int) throws(HCPackError) -> [Outcome?] {
        spanLimit.store(min(limit, spans.count), ordering: .relaxed)
        waitForThreads()
        let (outcomes, failure) = shared.withLock { ($0.outcomes, $0.failure) }
        if let failure { throw failure }
        return outcomes
    }

    /// Stops at the next chunk and waits for the threads (a scan that failed needs nothing more).
    func stop() {
        cancelled.store(true, ordering: .relaxed)
        waitForThreads()
    }

    private func waitForThreads() {
        if waited { return }
        waited = true
        copies.withLock { $0.closed = true }
        for _ in 0..<threadCount { copyQueued.signal() }
        for _ in 0..<threadCount { stopped.wait() }
    }

    /// Copies first (the scan waits for them at its end), then the next span to hash; with neither, waits for
    /// a copy until no more can come.
    private func work() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 64)
        defer { buffer.deallocate() }
        while !cancelled.load(ordering: .relaxed) {
            do throws(HCPackError) {
                if let copy = copies.withLock({ $0.queue.isEmpty ? nil : $0.queue.removeFirst() }) {
                    try self.copy(spans[copy.span], opening: copy.open, through: buffer)
                    continue
                }
                let index = nextSpan.load(ordering: .relaxed)
                if index < spanLimit.load(ordering: .relaxed),
                    nextSpan.compareExchange(expected: index, desired: index + 1, ordering: .relaxed).exchanged
                {
                    if let outcome = try read(spans[index], index: index, through: buffer) {
                        shared.withLock { $0.outcomes[index] = outcome }
                    }
                    continue
                }
                if index < spanLimit.load(ordering: .relaxed) { continue }  // another thread took it
            } catch {
                cancelled.store(true, ordering: .relaxed)
                shared.withLock { if $0.failure == nil { $0.failure = error } }
                return
            }
            if copies.withLock({ $0.closed && $0.queue.isEmpty }) { return }
            copyQueued.wait()
        }
    }

    /// Creates a staged file and copies `span` into it; nothing when `open` declines (a conflict it recorded).
    private func copy(_ span: Span, opening open: HashPipeline.Opener, through buffer: UnsafeMutableRawBufferPointer)
        throws(HCPackError)
    {
        guard let (descriptor, path) = try open() else { return }
        var output = StagedOutput(descriptor: descriptor, path: path, startsWriteback: true)
        var done: UInt64 = 0
        var inKernel = true
        while done < span.size {
            if cancelled.load(ordering: .relaxed) {
                _ = output.close(keep: false)
                return
            }
            let count = Int(min(UInt64(buffer.count), span.size - done))
            let offset = Int64(span.dataOffset + done)
            var copied = 0
            do throws(HCPackError) {
                if inKernel,
                    let kernel = try Descriptor.copyRange(from: file.descriptor, at: offset, to: descriptor, count: count, path: path)
                {
                    copied = kernel
                    output.wrote(Int64(copied))
                } else {
                    inKernel = false
                    let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[..<count])
                    copied = try file.readAvailable(into: chunk, at: offset)
                    if let failure = output.write(UnsafeRawBufferPointer(rebasing: chunk[..<copied])) { throw failure }
                }
            } catch {
                output.fail()
                _ = output.close(keep: false)
                throw error
            }
            if copied == 0 {
                _ = output.close(keep: false)
                throw Self.truncated(file.path)
            }
            done += UInt64(copied)
        }
        if let failure = output.close(keep: true) { throw failure }
    }

    private static func truncated(_ path: String) -> HCPackError {
        // The records placed these bytes inside the file: it was cut short meanwhile.
        HCPackError(.io, "an archive was truncated while hcpack was reading it (\(path)); run the command again", path: path)
    }

    /// One span's digests; nil when stopped or limited meanwhile.
    private func read(_ span: Span, index: Int, through buffer: UnsafeMutableRawBufferPointer) throws(HCPackError) -> Outcome? {
        let hasher = Digest.Hasher(.sha256)
        var crc: UInt32 = 0
        var head: [UInt8] = []
        var frame = span.frame
        var done: UInt64 = 0
        while done < span.size {
            if cancelled.load(ordering: .relaxed) || index >= spanLimit.load(ordering: .relaxed) { return nil }
            let count = Int(min(UInt64(buffer.count), span.size - done))
            let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[..<count])
            guard try file.readAvailable(into: chunk, at: Int64(span.dataOffset + done)) == count else {
                throw Self.truncated(file.path)
            }
            let bytes = UnsafeRawBufferPointer(chunk)
            hasher.update(bytes)
            crc = CRC32.update(crc, with: bytes)
            if head.isEmpty { head = Array(bytes.prefix(PackageEntry.headLength)) }
            frame?.feed(bytes)
            done += UInt64(count)
        }
        return Outcome(sha256: hasher.finalize(), crc32: crc, head: head, frame: frame?.verdict)
    }
}

/// The scan's side of `StoredDataHashing`: once the zip's records are known (read beside the scan, checked
/// without waiting), starts the threads on the stored entries libarchive has not reached yet, and tells the
/// scan which entries are theirs. An entry is theirs only when libarchive names it and sizes it as the
/// central directory does; any other entry is read by libarchive as before.
final class StoredDataScan {
    private let records: BackgroundResult<ZipStructureCheck.Records?>
    private let descriptor: Int32
    private let path: String
    /// Span index by read index (the entry's place in libarchive's order).
    private var plan: [Int: Int] = [:]
    private var spans: [StoredDataHashing.Span] = []
    private var isDecided = false
    private var hashing: StoredDataHashing?

    /// Whether the scan waits for the records at the first entry large enough to be the threads' (tests, for
    /// a known outcome); otherwise entries met before the records are known are read by libarchive: the
    /// records of 100,000 entries take longer to read than the entries they would spare.
    private let waitsForRecords: Bool

    init(records: BackgroundResult<ZipStructureCheck.Records?>, descriptor: Int32, path: String, waitsForRecords: Bool) {
        self.records = records
        self.waitsForRecords = waitsForRecords
        self.descriptor = descriptor
        self.path = path
    }

    /// The span of the entry read `readIndex`-th, named `name` and declaring `declaredSize` bytes, when the
    /// threads read its data; nil when libarchive is to read it.
    func span(forRead readIndex: Int, name: [UInt8], declaredSize: Int64?) -> (index: Int, size: UInt64)? {
        if !isDecided {
            let waits = waitsForRecords && (declaredSize ?? 0) >= Int64(StoredDataHashing.Span.minimumBytes)
            guard let outcome = waits ? records.outcome() : records.outcomeIfDone() else { return nil }
            isDecided = true
            guard case .success(let records?) = outcome else { return nil }
            let byReadIndex = ZipStructureCheck.storedDataPlan(of: records)
            for index in byReadIndex.keys.sorted() where index >= readIndex {
                plan[index] = spans.count
                spans.append(byReadIndex[index]!)
            }
            if !spans.isEmpty, let owned = try? Descriptor.duplicate(descriptor, path: path) {
                hashing = StoredDataHashing(spans: spans, descriptor: owned, path: path)
            } else {
                plan = [:]
            }
        }
        guard let index = plan[readIndex] else { return nil }
        let span = spans[index]
        guard span.name == name, declaredSize == Int64(exactly: span.size) else { return nil }
        return (index, span.size)
    }

    /// Waits for the threads to read the spans before `limit`: each span's outcome by index. Throws the first
    /// read failure.
    func outcomes(before limit: Int) throws(HCPackError) -> [StoredDataHashing.Outcome?] {
        try hashing?.outcomes(before: limit) ?? []
    }

    /// Copies span `index` into the staged file `open` creates (see `StoredDataHashing.copy`).
    func copy(span index: Int, opening open: @escaping HashPipeline.Opener) {
        hashing?.copy(span: index, opening: open)
    }

    /// Stops the threads and waits for them.
    func stop() {
        hashing?.stop()
    }
}
