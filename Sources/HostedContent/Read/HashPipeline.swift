import ArchiveIO
import Digest
import Dispatch
import Foundation
import Synchronization


/// SHA-256 (and, when asked, CRC-32), and optionally the file writes, on other threads, so that they overlap
/// reading and decompressing an archive (verify, install; build has its own `ArchiveOutput`).
///
/// The caller hands over a stream of files, chunk by chunk; chunks are packed into a few fixed buffers
/// (bounded memory: `slotCount` x `slotSize`), hashed in order by one worker thread, and each file's digest
/// comes back under the ticket `end()` returned. Small files share a buffer, and the workers are woken once
/// per full buffer rather than once per file: with thousands of small files, per-file wake-ups were 15,000
/// futex calls.
///
/// A chunk can also be written to a file the pipeline owns (`adopt`). With `writer: .ownThread` the writes
/// run on a second worker that reads the same buffers (a buffer is free again once both workers are done
/// with it): writing into the page cache costs as much as SHA-256, and on one worker the two together were
/// the longest thread of an install. The writing worker starts each file's writeback and closes the file
/// when it ends. The first write failure is kept and thrown by `check()` and `finishWriting()`; later writes
/// are dropped.
final class HashPipeline: @unchecked Sendable {
    // @unchecked: a slot belongs to the caller until its jobs are submitted and to the workers until they
    // have all reached its release; everything else the workers share sits behind mutexes.
    private enum Job {
        case data(slot: Int, start: Int, count: Int, file: File?, hashed: Bool)
        case end(ticket: Int)
        /// The worker is done with a slot once it reaches this job; the last one frees it.
        case release(Meeting)
        /// From here on `file` is the writing worker's, which opens it with `open`.
        case adopt(file: File, open: Opener, startsWriteback: Bool)
        /// Closes an adopted file; with `keep`, first sets mode 0644 and (without syncfs) fsyncs it.
        case close(file: File, keep: Bool)
        case stop
    }

    /// An adopted file, as the caller names it to `update` and `close`.
    struct File: Hashable, Sendable {
        fileprivate let number: Int
    }

    /// Opens an adopted file, on the writing worker: its descriptor and how messages name it, or nil when its
    /// data is to be dropped (the opener has recorded why). A throw fails the pipeline like a failed write.
    typealias Opener = @Sendable () throws(HCPackError) -> (descriptor: Int32, path: String)?

    /// Where adopted files are written.
    enum WriterThread {
        /// On the hashing worker, after hashing: one thread for callers that write little or hash little.
        case hashingThread
        /// On a worker of its own.
        case ownThread
    }

    /// What a worker does with the jobs it is given (every worker sees every job, in order).
    private struct Role: OptionSet {
        let rawValue: Int
        static let hashing = Role(rawValue: 1)
        static let writing = Role(rawValue: 2)
    }

    /// One worker thread: what it does with the jobs, and its lane in `lanes`.
    private final class Worker: Sendable {
        let role: Role
        let lane: Int
        let stopped = DispatchSemaphore(value: 0)
        init(role: Role, lane: Int) {
            self.role = role
            self.lane = lane
        }
    }

    private static let slotCount = 4
    private static let slotSize = 1 << 20
    /// Adopted files not yet closed by the worker, at most: a process may have few descriptors (ulimit -n).
    private let openFiles = DispatchSemaphore(value: 32)
    private let slots: [UnsafeMutableRawBufferPointer]
    private let freeSlots: DispatchSemaphore
    private let workers: [Worker]
    private let lanes: JobLanes<Job>
    private let computesChecksums: Bool
    private let shared = Mutex<(digests: [[UInt8]], checksums: [UInt32], failure: HCPackError?)>(([], [], nil))
    /// Jobs for the slot being filled, handed over together when it is full.
    private var batch: [Job] = []
    /// The slot being filled (owned by the caller) and how many bytes it holds; nil before the first byte.
    private var filling: (slot: Int, used: Int)?
    private var nextSlot = 0
    private var nextTicket = 0
    private var nextFile = 0
    /// Adopted files not yet given to `close`: `finish()` gives their `openFiles` places back (libdispatch
    /// refuses to free a semaphore below its initial value).
    private var unclosedFiles = 0
    private var isFinished = false
    /// The caller's own hashing and writing when the pipeline runs inline; nil with workers.
    private var inline: (hasher: Digest.Hasher, crc: UInt32, files: AdoptedFiles)?

    /// Work up to this many bytes stays on one thread: archives this small are hashed (and their files
    /// written) on the reading thread, folders of files this small read, and archives this small written
    /// (`ArchiveSink`); for them, threads, their buffers and the hand-overs cost more CPU than the overlap saves
    /// (bench/README.md, "Making the json delta").
    static let inlineBytes: Int64 = 1 << 20

    /// - Parameters:
    ///   - writer: where adopted files are written.
    ///   - checksums: also computes each file's CRC-32 (`checksums()`), for zip entries whose CRC-32 the
    ///     caller checks instead of libarchive (which would compute it on the reading thread).
    ///   - inline: no workers: every call hashes and writes on the caller's thread before it returns.
    init(writer: WriterThread = .hashingThread, checksums: Bool = false, inline: Bool = false) {
        computesChecksums = checksums
        if inline {
            slots = []
            freeSlots = DispatchSemaphore(value: 0)
            workers = []
            lanes = JobLanes(count: 0)
            self.inline = (Digest.Hasher(.sha256), 0, AdoptedFiles())
            return
        }
        slots = (0..<Self.slotCount).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: Self.slotSize, alignment: 64) }
        freeSlots = DispatchSemaphore(value: Self.slotCount)
        workers =
            switch writer {
            case .hashingThread: [Worker(role: [.hashing, .writing], lane: 0)]
            case .ownThread: [Worker(role: .hashing, lane: 0), Worker(role: .writing, lane: 1)]
            }
        lanes = JobLanes(count: workers.count)
        for (index, worker) in workers.enumerated() {
            WorkerThread.start(name: index == 0 ? "hcpack-sha256" : "hcpack-write") { [self] in work(worker) }
        }
    }

    /// The workers hold the pipeline until `finish()` stops them: every owner calls it, on every path.
    deinit {
        for slot in slots { slot.deallocate() }
    }

    /// Takes over a file that the writing worker opens (`open`) before its first bytes: `update(_:writingTo:)`
    /// appends to it, `close` closes it. Creating thousands of small files is as much work as inflating
    /// them, and the reading thread has the inflating to do. Without `startsWriteback` the worker only writes.
    func adopt(startsWriteback: Bool = true, opening open: @escaping Opener) -> File {
        if inline != nil {
            let file = File(number: nextFile)
            nextFile += 1
            if shared.withLock({ $0.failure == nil }), let failure = inline!.files.adopt(file, open: open, startsWriteback: startsWriteback) {
                record(failure)
            }
            return file
        }
        if openFiles.wait(timeout: .now()) == .timedOut {
            // Too many files waiting for their close: hand over the queued closes, then wait for one.
            handOver()
            openFiles.wait()
        }
        let file = File(number: nextFile)
        nextFile += 1
        unclosedFiles += 1
        batch.append(.adopt(file: file, open: open, startsWriteback: startsWriteback))
        return file
    }

    /// Closes an adopted file once everything before has been written; with `keep` false (an abandoned
    /// file) nothing more is done to it.
    func close(_ file: File, keep: Bool) {
        if inline != nil {
            if let failure = inline!.files.close(file, keep: keep) { record(failure) }
            return
        }
        unclosedFiles -= 1
        batch.append(.close(file: file, keep: keep))
    }

    /// Adds bytes to the current file's hash (copied: `bytes` may be reused as soon as this returns) and, when
    /// `file` is an adopted file, writes them to it; with `hashing` false they are only written.
    func update(_ bytes: UnsafeRawBufferPointer, writingTo file: File? = nil, hashing: Bool = true) {
        var unused: UInt32 = 0
        update(bytes, writingTo: file, hashing: hashing, crc: &unused, checksums: false)
    }

    /// `update`, also moving `crc` over the bytes, on this thread: over the copy, which the copy has just
    /// brought into the cache (over libarchive's block, a mapped file's pages read for the first time, the
    /// CRC-32 took half as long again).
    func update(_ bytes: UnsafeRawBufferPointer, writingTo file: File? = nil, crc: inout UInt32) {
        update(bytes, writingTo: file, hashing: true, crc: &crc, checksums: true)
    }

    private func update(
        _ bytes: UnsafeRawBufferPointer, writingTo file: File?, hashing: Bool, crc: inout UInt32, checksums: Bool
    ) {
        if inline != nil {
            if hashing { inline!.hasher.update(bytes) }
            if checksums { crc = CRC32.update(crc, with: bytes) }
            if computesChecksums && hashing { inline!.crc = CRC32.update(inline!.crc, with: bytes) }
            if let file, let failure = inline!.files.write(bytes, to: file) { record(failure) }
            return
        }
        var offset = 0
        while offset < bytes.count {
            let (slot, used) = filling ?? takeSlot()
            let count = min(Self.slotSize - used, bytes.count - offset)
            let copy = UnsafeMutableRawBufferPointer(rebasing: slots[slot][used..<(used + count)])
            copy.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
            if checksums { crc = CRC32.update(crc, with: UnsafeRawBufferPointer(copy)) }
            batch.append(.data(slot: slot, start: used, count: count, file: file, hashed: hashing))
            filling = (slot, used + count)
            offset += count
            if used + count == Self.slotSize { handOver() }
        }
    }

    /// Ends the current file; its digest will be `finish()[ticket]`.
    func end() -> Int {
        defer { nextTicket += 1 }
        if inline != nil {
            let digest = inline!.hasher.finalize()
            inline!.hasher = Digest.Hasher(.sha256)
            let checksum = inline!.crc
            inline!.crc = 0
            shared.withLock { state in
                state.digests.append(digest)
                if computesChecksums { state.checksums.append(checksum) }
            }
            return nextTicket
        }
        batch.append(.end(ticket: nextTicket))
        return nextTicket
    }

    /// Throws the first write failure the worker has met so far, if any.
    func check() throws(HCPackError) {
        if let failure = shared.withLock({ $0.failure }) { throw failure }
    }

    /// Waits until every adopted file is written and closed; throws the first failure.
    func finishWriting() throws(HCPackError) {
        _ = finish()
        try check()
    }

    /// Waits for the workers and returns every ended file's digest, by ticket. Bytes given after the last
    /// `end()` (a file cut short by an error) are dropped.
    func finish() -> [[UInt8]] {
        if !isFinished, inline != nil {
            isFinished = true
            inline!.files.closeAll()
        } else if !isFinished {
            isFinished = true
            handOver()
            submit([.stop])
            for worker in workers { worker.stopped.wait() }
            for _ in 0..<unclosedFiles { openFiles.signal() }
            unclosedFiles = 0
        }
        return shared.withLock { $0.digests }
    }

    /// Every ended file's CRC-32, by ticket (empty unless made with `checksums: true`); waits like `finish()`.
    func checksums() -> [UInt32] {
        _ = finish()
        return shared.withLock { $0.checksums }
    }

    private func takeSlot() -> (slot: Int, used: Int) {
        freeSlots.wait()
        let slot = nextSlot
        nextSlot = (nextSlot + 1) % Self.slotCount
        return (slot, 0)
    }

    /// Gives the worker the filled slot and every job so far.
    private func handOver() {
        if filling != nil { batch.append(.release(Meeting(workers.count) { [freeSlots] in freeSlots.signal() })) }
        filling = nil
        if batch.isEmpty { return }
        submit(batch)
        batch.removeAll(keepingCapacity: true)
    }

    private func submit(_ jobs: [Job]) {
        lanes.submit(jobs)
    }

    private func work(_ worker: Worker) {
        let hashing = worker.role.contains(.hashing)
        let writing = worker.role.contains(.writing)
        // With a writing worker, the CRC-32 is its: SHA-256 alone is as much work per byte as a write into the
        // page cache plus a CRC-32 (install on tmpfs: 0.70 s against 0.74 s with both digests on one worker).
        let checksumming = computesChecksums && (workers.count == 2 ? writing : hashing)
        var hasher = Digest.Hasher(.sha256)
        var crc: UInt32 = 0
        var files = AdoptedFiles()
        while true {
            for job in lanes.take(worker.lane) {
                switch job {
                case .data(let slot, let start, let count, let file, let hashed):
                    let bytes = UnsafeRawBufferPointer(rebasing: slots[slot][start..<(start + count)])
                    if hashing && hashed { hasher.update(bytes) }
                    if checksumming && hashed { crc = CRC32.update(crc, with: bytes) }
                    if writing, let file, let failure = files.write(bytes, to: file) { record(failure) }
                case .end:
                    if hashing {
                        let digest = hasher.finalize()
                        shared.withLock { $0.digests.append(digest) }
                        hasher = Digest.Hasher(.sha256)
                    }
                    if checksumming {
                        let checksum = crc
                        shared.withLock { $0.checksums.append(checksum) }
                        crc = 0
                    }
                case .release(let meeting):
                    meeting.arrive()
                case .adopt(let file, let open, let startsWriteback):
                    // After a failure nothing new is created: the caller is about to give up and clean up.
                    guard writing, shared.withLock({ $0.failure == nil }) else { continue }
                    if let failure = files.adopt(file, open: open, startsWriteback: startsWriteback) { record(failure) }
                case .close(let file, let keep):
                    guard writing else { continue }
                    if let failure = files.close(file, keep: keep) { record(failure) }
                    openFiles.signal()
                case .stop:
                    files.closeAll()
                    worker.stopped.signal()
                    return
                }
            }
        }
    }

    private func record(_ failure: HCPackError) {
        shared.withLock { state in
            if state.failure == nil { state.failure = failure }
        }
    }
}

/// A staged file being written: its descriptor, its path for messages, the bytes written and those handed to
/// writeback. Written by the pipeline's writing worker (`AdoptedFiles`) or by `StoredDataHashing`.
struct StagedOutput {
    let descriptor: Int32
    let path: String
    let startsWriteback: Bool
    private var written: Int64 = 0
    private var writebackStarted: Int64 = 0
    /// A write failed: the file gets nothing more and is not kept.
    private(set) var failed = false

    init(descriptor: Int32, path: String, startsWriteback: Bool) {
        self.descriptor = descriptor
        self.path = path
        self.startsWriteback = startsWriteback
    }

    /// Writes all of `bytes`; after a failure the file gets nothing more.
    mutating func write(_ bytes: UnsafeRawBufferPointer) -> HCPackError? {
        if failed { return nil }
        do throws(HCPackError) {
            try Descriptor.writeAll(descriptor, bytes, path: path)
        } catch {
            failed = true
            return error
        }
        wrote(Int64(bytes.count))
        return nil
    }

    /// Counts `count` bytes written by other means (`copy_file_range`).
    mutating func wrote(_ count: Int64) {
        written += count
        // Writeback starts here, on the writing thread, rather than all at once in the final sync.
        if startsWriteback && written - writebackStarted >= FileSystemSync.writebackChunk {
            FileSystemSync.startWriteback(descriptor, from: writebackStarted, length: written - writebackStarted)
            writebackStarted = written
        }
    }

    /// Marks the file failed (it is then released, not kept).
    mutating func fail() { failed = true }

    /// Closes the file; with `keep` (and no failure), first mode 0644, `fsync` where the folder cannot be
    /// synced as a whole, and the writeback of the rest. Returns the first failure.
    func close(keep: Bool) -> HCPackError? {
        var failure: HCPackError?
        if keep && !failed {
            do throws(HCPackError) {
                try Descriptor.setMode(descriptor, 0o644, path: path)
                if !FileSystemSync.isAvailable { try Descriptor.synchronize(descriptor, path: path) }
                if startsWriteback && written - writebackStarted >= 128 << 10 {
                    // Not for small files: one writeback request per few kilobytes costs more than the final syncfs.
                    FileSystemSync.startWriteback(descriptor, from: writebackStarted, length: written - writebackStarted)
                }
            } catch {
                failure = error
            }
        }
        if keep && failure == nil && !failed {
            do throws(HCPackError) { try Descriptor.close(descriptor, path: path) } catch { failure = error }
        } else {
            Descriptor.release(descriptor)
        }
        return failure
    }
}

/// The writing worker's open files.
private struct AdoptedFiles {
    /// Adopted files that opened; one that did not gets no entry, and its data is dropped.
    private var files: [HashPipeline.File: StagedOutput] = [:]

    /// Opens an adopted file; returns the opener's failure.
    mutating func adopt(_ file: HashPipeline.File, open: HashPipeline.Opener, startsWriteback: Bool) -> HCPackError? {
        do throws(HCPackError) {
            guard let (descriptor, path) = try open() else { return nil }
            files[file] = StagedOutput(descriptor: descriptor, path: path, startsWriteback: startsWriteback)
            return nil
        } catch {
            return error
        }
    }

    /// Writes all of `bytes`; after a failure the file gets nothing more.
    mutating func write(_ bytes: UnsafeRawBufferPointer, to handle: HashPipeline.File) -> HCPackError? {
        files[handle]?.write(bytes) ?? nil
    }

    mutating func close(_ handle: HashPipeline.File, keep: Bool) -> HCPackError? {
        files.removeValue(forKey: handle)?.close(keep: keep)
    }

    mutating func closeAll() {
        for file in files.values { Descriptor.release(file.descriptor) }
        files = [:]
    }
}
