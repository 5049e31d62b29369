import Digest
import Dispatch
import Foundation
import Synchronization

/// Writes an archive's byte stream to its file on a thread of its own and hashes it on a second one: `write`
/// and SHA-256 each cost about 0.2 s per 250 MB, and on one thread they were a stored build's longest
/// (bench/store-speed-notes.md).
///
/// Like `HashPipeline`, bytes that the caller reuses at once (libarchive's headers and deflate output) are
/// copied into a few fixed buffers (`slotCount` x `slotSize`). Unlike it, bytes the caller keeps (a stored
/// entry's data, which libarchive hands over in the very buffer `SourceReader` read it into) can be lent:
/// the threads read them where they are and the caller's `afterWritten` action runs once both have, so the
/// buffer goes back to the reader only then. That is one copy of every stored byte fewer.
final class ArchiveOutput: @unchecked Sendable {
    // @unchecked: a slot belongs to the caller until its jobs are submitted and to the threads until both
    // have passed its release; lent bytes belong to the threads until their `after` job; the job queues and
    // the outcome sit behind mutexes.
    /// @unchecked: a lent pointer is the threads' until its `after` job (see above).
    private enum Job: @unchecked Sendable {
        case copied(slot: Int, start: Int, count: Int)
        case lent(UnsafeRawBufferPointer)
        /// Runs its action once every thread has reached it (a slot's release, or the caller's action).
        case after(Meeting)
        case stop
    }

    private static let slotCount = 4
    private static let slotSize = 1 << 20
    private let slots: [UnsafeMutableRawBufferPointer]
    /// Made at 0 and signalled once a slot: libdispatch traps when a semaphore is freed below its initial value,
    /// as this one may be when work stops with slots still out.
    private let freeSlots = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    /// The writer's (0), then the hasher's (1).
    private let lanes = JobLanes<Job>(count: 2)
    private let shared = Mutex<(failure: HCPackError?, digest: [UInt8]?)>((nil, nil))
    private let descriptor: Int32
    private let path: String
    /// Written and hashed on the caller's thread: no threads, no slots (`init(inline:)`).
    private let inlineHasher: Digest.Hasher?

    // The caller's own.
    private var batch: [Job] = []
    private var filling: (slot: Int, used: Int)?
    private var nextSlot = 0
    private var isStopped = false
    private var isClosed = false

    /// Starts the threads; the writer owns `descriptor` from here on (known as `path` in messages) and closes it.
    /// The SHA-256 of everything written is taken on a second thread (`finish` returns it).
    /// - Parameter inline: write and hash on the caller's thread instead, for an archive of a few hundred KiB
    ///   (a delta of small files): two threads and 4 MiB of slots cost more than its writing (bench/README.md).
    init(descriptor: Int32, path: String, inline: Bool = false) {
        self.descriptor = descriptor
        self.path = path
        inlineHasher = inline ? Digest.Hasher(.sha256) : nil
        if inline {
            slots = []
            return
        }
        slots = (0..<Self.slotCount).map { _ in
            UnsafeMutableRawBufferPointer.allocate(byteCount: Self.slotSize, alignment: 64)
        }
        for _ in 0..<Self.slotCount { freeSlots.signal() }
        WorkerThread.start(name: "hcpack-write") { [self] in work(lane: 0, hasher: nil) }
        WorkerThread.start(name: "hcpack-hash") { [self] in work(lane: 1, hasher: Digest.Hasher(.sha256)) }
    }

    deinit {
        for slot in slots { slot.deallocate() }
    }

    /// Appends a copy of `bytes` (they may be reused as soon as this returns).
    func write(_ bytes: UnsafeRawBufferPointer) {
        if inlineHasher != nil { return writeInline(bytes) }
        var offset = 0
        while offset < bytes.count {
            let (slot, used) = filling ?? takeSlot()
            let count = min(Self.slotSize - used, bytes.count - offset)
            UnsafeMutableRawBufferPointer(rebasing: slots[slot][used..<(used + count)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
            batch.append(.copied(slot: slot, start: used, count: count))
            filling = (slot, used + count)
            offset += count
            if used + count == Self.slotSize { handOver() }
        }
    }

    /// Appends `bytes` without copying them: they must stay as they are until an `afterWritten` action
    /// given later has run.
    func write(lent bytes: UnsafeRawBufferPointer) {
        if inlineHasher != nil { return writeInline(bytes) }
        if !bytes.isEmpty { batch.append(.lent(bytes)) }
    }

    /// Runs `action` on the thread once everything appended so far is written (or dropped after a failure).
    func afterWritten(_ action: @escaping @Sendable () -> Void) {
        if inlineHasher != nil { return action() }
        batch.append(.after(Meeting(lanes.count, action)))
        handOver()
    }

    /// Throws the first write failure the thread has met so far, if any.
    func check() throws(HCPackError) {
        if let failure = shared.withLock({ $0.failure }) { throw failure }
    }

    /// Waits for every byte to be written, then closes the file (mode 0644, and `fsync` where the folder
    /// cannot be synced as a whole); the SHA-256 of the stream. Throws the first failure.
    func finish() throws(HCPackError) -> [UInt8]? {
        stop()
        try check()
        isClosed = true
        do throws(HCPackError) {
            try Descriptor.setMode(descriptor, 0o644, path: path)
            if !FileSystemSync.isAvailable { try Descriptor.synchronize(descriptor, path: path) }
        } catch {
            Descriptor.release(descriptor)
            throw error
        }
        try Descriptor.close(descriptor, path: path)
        return shared.withLock { $0.digest }
    }

    /// Gives up the file: waits for the thread (it holds this object until it stops), then closes the file
    /// as it is.
    func abandon() {
        stop()
        if !isClosed { Descriptor.release(descriptor) }
        isClosed = true
    }

    private func stop() {
        if isStopped { return }
        isStopped = true
        if let inlineHasher {
            let digest = inlineHasher.finalize()
            shared.withLock { $0.digest = digest }
            return
        }
        handOver()
        submit([.stop])
        for _ in 0..<lanes.count { stopped.wait() }
    }

    /// `write` on the caller's thread: hashed, and written unless a write failed before.
    private func writeInline(_ bytes: UnsafeRawBufferPointer) {
        inlineHasher?.update(bytes)
        guard shared.withLock({ $0.failure == nil }) else { return }
        do throws(HCPackError) {
            try Descriptor.writeAll(descriptor, bytes, path: path)
        } catch {
            shared.withLock { $0.failure = error }
        }
    }

    private func takeSlot() -> (slot: Int, used: Int) {
        freeSlots.wait()
        let slot = nextSlot
        nextSlot = (nextSlot + 1) % Self.slotCount
        return (slot, 0)
    }

    /// Gives the thread every job so far; a full slot goes with them, a partly filled one stays the caller's.
    private func handOver() {
        if let (_, used) = filling, used == Self.slotSize {
            batch.append(.after(Meeting(lanes.count) { [freeSlots] in freeSlots.signal() }))
            filling = nil
        }
        if batch.isEmpty { return }
        submit(batch)
        batch.removeAll(keepingCapacity: true)
    }

    private func submit(_ jobs: [Job]) {
        lanes.submit(jobs)
    }

    /// The writer (no `hasher`) or the hasher: each goes through every job.
    private func work(lane: Int, hasher: Digest.Hasher?) {
        var failed = false
        func output(_ bytes: UnsafeRawBufferPointer) {
            if let hasher {
                hasher.update(bytes)
                return
            }
            guard !failed else { return }
            do throws(HCPackError) {
                try Descriptor.writeAll(descriptor, bytes, path: path)
            } catch {
                failed = true
                shared.withLock { $0.failure = error }
            }
        }
        while true {
            for job in lanes.take(lane) {
                switch job {
                case .copied(let slot, let start, let count):
                    output(UnsafeRawBufferPointer(rebasing: slots[slot][start..<(start + count)]))
                case .lent(let bytes):
                    output(bytes)
                case .after(let meeting):
                    meeting.arrive()
                case .stop:
                    if let hasher {
                        let digest = hasher.finalize()
                        shared.withLock { $0.digest = digest }
                    }
                    stopped.signal()
                    return
                }
            }
        }
    }
}
