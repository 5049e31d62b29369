import ArchiveIO
import Dispatch
import Foundation
import Synchronization

/// Reads a build's source files ahead of the thread that writes the archive, on a thread of its own: it
/// opens each file, checks its stamp, reads it into a few fixed buffers and chooses its compression, so the
/// writing thread only runs libarchive (whose deflate cannot leave the thread that calls it).
///
/// Bounded memory: `slotCount` x `slotSize`. Files are packed into the buffers one after another, and the
/// writing thread is woken once per full buffer rather than once per file (as `HashPipeline` does).
/// A file that cannot be read, or that no longer matches the stamp taken when it was planned, fails with
/// `Builder.changedError` (or the read's own error) where the copy reaches it; nothing after it is read.
final class SourceReader: @unchecked Sendable {
    // @unchecked: a slot belongs to the reader until its jobs are handed over and to the writing thread until
    // it is released through `freeSlots`; the jobs in between sit behind the mutex.
    private enum Job {
        /// A file starts, with the compression its first bytes call for.
        case begin(EntryCompression)
        case data(slot: Int, start: Int, count: Int)
        case end
        case failed(HCPackError)
        /// The writing thread is done with the slot once it reaches this job.
        case release(slot: Int)
    }

    private static let slotCount = 4
    private static let slotSize = 1 << 20
    private let slots: [UnsafeMutableRawBufferPointer]
    /// Made at 0 and signalled once a slot: libdispatch traps when a semaphore is freed below its initial value,
    /// as this one may be when work stops with slots still out.
    private let freeSlots = DispatchSemaphore(value: 0)
    private let ready = DispatchSemaphore(value: 0)
    private let shared = Mutex<[Job]>([])
    private let cancelled = Atomic<Bool>(false)
    /// Runs an action once the bytes handed out so far have left their buffers (`PackageSink.afterWritten`).
    private let afterConsumed: (@escaping @Sendable () -> Void) -> Void

    // The reading thread's own.
    private var batch: [Job] = []
    private var filling: (slot: Int, used: Int)?
    private var nextSlot = 0

    // The writing thread's own: jobs taken over and not yet consumed.
    private var received: [Job] = []
    private var position = 0

    /// Starts reading the files among `items` (relative to `root`), in their order.
    /// - Parameter afterConsumed: runs the action it is given once the bytes handed out so far are no longer
    ///   needed where they are; a buffer is read into again only then.
    init(
        _ items: [BuildPlan.Item], root: String, compression: CompressionPolicy,
        afterConsumed: @escaping (@escaping @Sendable () -> Void) -> Void
    ) {
        self.afterConsumed = afterConsumed
        // No files (a build whose files are all made by PreparedEntries): no buffers, no thread.
        let hasFiles = items.contains { $0.kind == .file }
        slots = (0..<(hasFiles ? Self.slotCount : 0)).map { _ in
            UnsafeMutableRawBufferPointer.allocate(byteCount: Self.slotSize, alignment: 64)
        }
        for _ in 0..<slots.count { freeSlots.signal() }
        guard hasFiles else { return }
        WorkerThread.start(name: "hcpack-read") { [self] in
            for item in items where item.kind == .file {
                if cancelled.load(ordering: .relaxed) { break }
                do throws(HCPackError) {
                    try read(item, root: root, compression: compression)
                } catch {
                    batch.append(.failed(error))
                    break
                }
            }
            handOver()
        }
    }

    deinit {
        for slot in slots { slot.deallocate() }
    }

    /// Stops reading (a build that failed needs nothing more); the thread ends at its next file or buffer.
    func cancel() {
        cancelled.store(true, ordering: .relaxed)
        freeSlots.signal()  // in case the thread waits for a buffer that will not come back
    }

    /// Starts the next file: its compression. Throws when the file could not be read as planned.
    func beginFile() throws(HCPackError) -> EntryCompression {
        switch try nextJob() {
        case .begin(let compression): return compression
        default: throw HCPackError(.io, "the source reader lost its place; report this as a bug")
        }
    }

    /// The current file's next bytes, valid until the next call; nil at its end. Throws when the file changed.
    func nextChunk() throws(HCPackError) -> UnsafeRawBufferPointer? {
        switch try nextJob() {
        case .data(let slot, let start, let count): return UnsafeRawBufferPointer(rebasing: slots[slot][start..<(start + count)])
        case .end: return nil
        default: throw HCPackError(.io, "the source reader lost its place; report this as a bug")
        }
    }

    /// The next job that is not a release; giving back the slots passed on the way once their bytes are out.
    private func nextJob() throws(HCPackError) -> Job {
        while true {
            if position == received.count {
                ready.wait()
                received = shared.withLock { jobs in
                    let taken = jobs
                    jobs = []
                    return taken
                }
                position = 0
                continue
            }
            let job = received[position]
            position += 1
            switch job {
            case .release: afterConsumed { [self] in freeSlots.signal() }
            case .failed(let error): throw error
            default: return job
            }
        }
    }

    // MARK: The reading thread

    private func read(_ item: BuildPlan.Item, root: String, compression: CompressionPolicy) throws(HCPackError) {
        let source = try PlannedSource(item, root: root)
        // The compression is chosen from one piece holding the file's first `sampleLength` bytes (all of a
        // smaller file), as it was from the first 1 MiB read: the same choice.
        let head = Int(min(item.size, Int64(CompressionPolicy.sampleLength)))
        if let (_, used) = filling, Self.slotSize - used < head { handOver() }
        var remaining = item.size
        var begun = false
        while remaining > 0 {
            guard let (slot, used) = try takeSpace() else { return }
            let wanted = Int(min(remaining, Int64(Self.slotSize - used)))
            let space = UnsafeMutableRawBufferPointer(rebasing: slots[slot][used..<(used + wanted)])
            let count = try source.fill(space)
            if !begun {
                batch.append(.begin(compression.choose(head: UnsafeRawBufferPointer(rebasing: space[..<count]))))
                begun = true
            }
            if count > 0 { batch.append(.data(slot: slot, start: used, count: count)) }
            filling = (slot, used + count)
            remaining -= Int64(count)
            if used + count == Self.slotSize { handOver() }
            if count < wanted { break }  // ended early: the file shrank
        }
        if !begun { batch.append(.begin(.store)) }
        try source.checkEnd(remaining: remaining)
        batch.append(.end)
    }

    /// The slot being filled and how much of it is used, taking a free one when needed; nil once cancelled.
    private func takeSpace() throws(HCPackError) -> (slot: Int, used: Int)? {
        if let filling { return filling }
        freeSlots.wait()
        if cancelled.load(ordering: .relaxed) { return nil }
        let slot = nextSlot
        nextSlot = (nextSlot + 1) % Self.slotCount
        filling = (slot, 0)
        return filling
    }

    /// Gives the writing thread every job so far and the slot being filled.
    private func handOver() {
        if let (slot, _) = filling { batch.append(.release(slot: slot)) }
        filling = nil
        if batch.isEmpty { return }
        shared.withLock { $0.append(contentsOf: batch) }
        batch.removeAll(keepingCapacity: true)
        ready.signal()
    }
}

/// A build's source file, opened to be copied into the package: still the file `prepare` hashed (its `fstat`
/// stamp), and, once read, no longer than planned and unchanged meanwhile (`checkEnd`).
struct PlannedSource {
    let file: OpenFile
    let stamp: FileStamp
    let path: String

    /// Opens the item's source; throws `Builder.changedError` when it is not the planned file any more.
    init(_ item: BuildPlan.Item, root: String) throws(HCPackError) {
        path = item.sourceRelative.isEmpty ? root : root + "/" + item.sourceRelative
        file = try OpenFile(reading: path)
        guard let stamp = item.stamp, try file.stamp() == stamp else { throw Builder.changedError(path) }
        self.stamp = stamp
    }

    /// Reads until `buffer` is full or the file ends; the count read.
    func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(HCPackError) -> Int {
        var count = 0
        while count < buffer.count {
            let read = try Descriptor.read(
                file.descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]), path: path)
            if read == 0 { break }
            count += read
        }
        return count
    }

    /// Checks the read is whole: `remaining` of the planned size is 0, nothing follows, the stamp is the planned one.
    func checkEnd(remaining: Int64) throws(HCPackError) {
        var probe: UInt8 = 0
        let more = try withUnsafeMutableBytes(of: &probe) { (byte) throws(HCPackError) in
            try Descriptor.read(file.descriptor, into: byte, path: path)
        }
        guard remaining == 0, more == 0, try file.stamp() == stamp else { throw Builder.changedError(path) }
    }
}
