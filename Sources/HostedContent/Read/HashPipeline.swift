import Digest
import Dispatch
import Foundation
import Synchronization


/// SHA-256, and optionally the file writes, on a second thread, so that they overlap reading and
/// decompressing an archive (verify, install) or compressing one (build).
///
/// The caller hands over a stream of files, chunk by chunk; chunks are packed into a few fixed buffers
/// (bounded memory: `slotCount` x `slotSize`), hashed in order by one worker thread, and each file's digest
/// comes back under the ticket `end()` returned. Small files share a buffer, and the worker is woken once per
/// full buffer rather than once per file: with thousands of small files, per-file wake-ups were 15,000
/// futex calls.
///
/// A chunk can also be written to a file the pipeline owns (`adopt`): the worker writes it after hashing (or
/// only writes it, for a caller that hashes on its own thread),
/// starts its writeback, and closes the file when it ends. Writing is a third of install's and build's
/// main thread otherwise (the copy into the page cache). The first write failure is kept and thrown by
/// `check()` and `finishWriting()`; later writes are dropped.
final class HashPipeline: @unchecked Sendable {
    // @unchecked: a slot belongs to the caller until its jobs are submitted and to the worker until it is
    // released through `freeSlots`; everything else the worker shares sits behind the mutex.
    private enum Job {
        case data(slot: Int, start: Int, count: Int, file: Int32, hashed: Bool)
        case end(ticket: Int)
        /// The worker is done with the slot once it reaches this job.
        case release(slot: Int)
        /// From here on `descriptor` is the worker's, known as `path` in messages.
        case adopt(descriptor: Int32, path: String, startsWriteback: Bool)
        /// Closes an adopted file; with `keep`, first sets mode 0644 and (without syncfs) fsyncs it.
        case close(descriptor: Int32, keep: Bool)
        case stop
    }

    private static let slotCount = 4
    private static let slotSize = 1 << 20
    /// Adopted files not yet closed by the worker, at most: a process may have few descriptors (ulimit -n).
    private let openFiles = DispatchSemaphore(value: 32)
    private let slots: [UnsafeMutableRawBufferPointer]
    private let freeSlots: DispatchSemaphore
    private let pendingJobs = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    private let shared = Mutex<(jobs: [Job], digests: [[UInt8]], failure: HCPackError?)>(([], [], nil))
    /// Jobs for the slot being filled, handed over together when it is full.
    private var batch: [Job] = []
    /// The slot being filled (owned by the caller) and how many bytes it holds; nil before the first byte.
    private var filling: (slot: Int, used: Int)?
    private var nextSlot = 0
    private var nextTicket = 0
    private var isFinished = false

    init() {
        slots = (0..<Self.slotCount).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: Self.slotSize, alignment: 64) }
        freeSlots = DispatchSemaphore(value: Self.slotCount)
        let thread = Thread { [self] in work() }
        thread.name = "hcpack-sha256"
        thread.start()
    }

    deinit {
        if !isFinished { _ = finish() }
        for slot in slots { slot.deallocate() }
    }

    /// Takes over an open file: `update(_:writingTo:)` appends to it, `close` closes it. The caller must not
    /// use or close the descriptor afterwards. Without `startsWriteback` the worker only writes (another
    /// thread puts the file on disk, `ProgressiveSync`).
    func adopt(_ descriptor: Int32, path: String, startsWriteback: Bool = true) {
        if openFiles.wait(timeout: .now()) == .timedOut {
            // Too many files waiting for their close: hand over the queued closes, then wait for one.
            handOver()
            openFiles.wait()
        }
        batch.append(.adopt(descriptor: descriptor, path: path, startsWriteback: startsWriteback))
    }

    /// Closes an adopted file once everything before has been written; with `keep` false (an abandoned
    /// file) nothing more is done to it.
    func close(_ descriptor: Int32, keep: Bool) {
        batch.append(.close(descriptor: descriptor, keep: keep))
    }

    /// Adds bytes to the current file's hash (copied: `bytes` may be reused as soon as this returns) and, when
    /// `file` is an adopted descriptor, writes them to it; with `hashing` false they are only written.
    func update(_ bytes: UnsafeRawBufferPointer, writingTo file: Int32 = -1, hashing: Bool = true) {
        var offset = 0
        while offset < bytes.count {
            let (slot, used) = filling ?? takeSlot()
            let count = min(Self.slotSize - used, bytes.count - offset)
            UnsafeMutableRawBufferPointer(rebasing: slots[slot][used..<(used + count)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
            batch.append(.data(slot: slot, start: used, count: count, file: file, hashed: hashing))
            filling = (slot, used + count)
            offset += count
            if used + count == Self.slotSize { handOver() }
        }
    }

    /// Ends the current file; its digest will be `finish()[ticket]`.
    func end() -> Int {
        defer { nextTicket += 1 }
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

    /// Waits for the worker and returns every ended file's digest, by ticket. Bytes given after the last
    /// `end()` (a file cut short by an error) are dropped.
    func finish() -> [[UInt8]] {
        if !isFinished {
            isFinished = true
            handOver()
            submit([.stop])
            stopped.wait()
        }
        return shared.withLock { $0.digests }
    }

    private func takeSlot() -> (slot: Int, used: Int) {
        freeSlots.wait()
        let slot = nextSlot
        nextSlot = (nextSlot + 1) % Self.slotCount
        return (slot, 0)
    }

    /// Gives the worker the filled slot and every job so far.
    private func handOver() {
        if let (slot, _) = filling { batch.append(.release(slot: slot)) }
        filling = nil
        if batch.isEmpty { return }
        submit(batch)
        batch.removeAll(keepingCapacity: true)
    }

    private func submit(_ jobs: [Job]) {
        shared.withLock { $0.jobs.append(contentsOf: jobs) }
        pendingJobs.signal()
    }

    private func work() {
        var hasher = Digest.Hasher(.sha256)
        var files = AdoptedFiles()
        while true {
            pendingJobs.wait()
            let jobs = shared.withLock { state -> [Job] in
                let taken = state.jobs
                state.jobs = []
                return taken
            }
            for job in jobs {
                switch job {
                case .data(let slot, let start, let count, let file, let hashed):
                    let bytes = UnsafeRawBufferPointer(rebasing: slots[slot][start..<(start + count)])
                    if hashed { hasher.update(bytes) }
                    if file >= 0, let failure = files.write(bytes, to: file) { record(failure) }
                case .end:
                    let digest = hasher.finalize()
                    shared.withLock { $0.digests.append(digest) }
                    hasher = Digest.Hasher(.sha256)
                case .release:
                    freeSlots.signal()
                case .adopt(let descriptor, let path, let startsWriteback):
                    files.adopt(descriptor, path: path, startsWriteback: startsWriteback)
                case .close(let descriptor, let keep):
                    if let failure = files.close(descriptor, keep: keep) { record(failure) }
                    openFiles.signal()
                case .stop:
                    files.closeAll()
                    stopped.signal()
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

/// The worker's open files: path for messages, bytes written, bytes handed to writeback.
private struct AdoptedFiles {
    private struct File {
        var path: String
        var startsWriteback: Bool
        var written: Int64 = 0
        var writebackStarted: Int64 = 0
        var failed = false
    }
    private var files: [Int32: File] = [:]

    mutating func adopt(_ descriptor: Int32, path: String, startsWriteback: Bool) {
        files[descriptor] = File(path: path, startsWriteback: startsWriteback)
    }

    /// Writes all of `bytes`; after a failure the file gets nothing more.
    mutating func write(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> HCPackError? {
        guard var file = files[descriptor], !file.failed else { return nil }
        do throws(HCPackError) {
            try Descriptor.writeAll(descriptor, bytes, path: file.path)
        } catch {
            file.failed = true
            files[descriptor] = file
            return error
        }
        file.written += Int64(bytes.count)
        // Writeback starts here, on the worker, rather than all at once in the final sync.
        if file.startsWriteback && file.written - file.writebackStarted >= FileSystemSync.writebackChunk {
            FileSystemSync.startWriteback(descriptor, from: file.writebackStarted, length: file.written - file.writebackStarted)
            file.writebackStarted = file.written
        }
        files[descriptor] = file
        return nil
    }

    mutating func close(_ descriptor: Int32, keep: Bool) -> HCPackError? {
        guard let file = files.removeValue(forKey: descriptor) else { return nil }
        var failure: HCPackError?
        if keep && !file.failed {
            do throws(HCPackError) {
                try Descriptor.setMode(descriptor, 0o644, path: file.path)
                if !FileSystemSync.isAvailable { try Descriptor.synchronize(descriptor, path: file.path) }
                if file.startsWriteback && file.written - file.writebackStarted >= 128 << 10 {
                    // Not for small files: one writeback request per few kilobytes costs more than the final syncfs.
                    FileSystemSync.startWriteback(
                        descriptor, from: file.writebackStarted, length: file.written - file.writebackStarted)
                }
            } catch {
                failure = error
            }
        }
        if keep && failure == nil && !file.failed {
            do throws(HCPackError) { try Descriptor.close(descriptor, path: file.path) } catch { failure = error }
        } else {
            Descriptor.release(descriptor)
        }
        return failure
    }

    mutating func closeAll() {
        for descriptor in files.keys { Descriptor.release(descriptor) }
        files = [:]
    }
}
