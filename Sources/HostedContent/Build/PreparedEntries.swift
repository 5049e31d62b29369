import ArchiveIO
import Dispatch
import Foundation
import Synchronization

/// Makes the zip entries of a build's small files on every core, ahead of the thread that assembles the
/// archive: each file is read (as planned: `PlannedSource`), its compression chosen, and libarchive writes
/// it as a one-entry zip (`ZipEntryWriter`) into memory. libarchive deflates on the thread that calls it,
/// and deflate was most of a build's CPU, on one core, while the other waited (bench/README.md, issue 16).
///
/// Entries come out in the order given (`next()`), whichever worker made them, and are the bytes a single
/// writer makes, so the archive does not depend on the number of cores or on timing. Bounded memory: at
/// most `aheadCount` entries of at most `largestFile` bytes each are made and not yet taken.
final class PreparedEntries: @unchecked Sendable {
    // @unchecked: `results` and `nextIndex` are behind `condition`; `items` and the settings never change.

    /// A file larger than this is copied by the assembling thread, streamed: no whole copy in memory.
    static let largestFile: Int64 = 64 << 10
    /// How many entries may be made and not yet taken.
    static let aheadCount = 64

    /// One file's entry: its local record (header, data, descriptor) and its central record.
    struct Entry: Sendable {
        var local: RecordBytes
        var central: ZipCentralRecord
        /// The file's size.
        var size: Int64
    }

    /// A local record's bytes, freed with the last reference: they may be lent to `ArchiveOutput`'s threads.
    final class RecordBytes: @unchecked Sendable {
        // @unchecked: written only by the worker that makes it, read-only once handed over.
        private(set) var buffer: UnsafeMutableRawBufferPointer
        private(set) var count = 0

        init(capacity: Int) {
            buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(capacity, 64), alignment: 16)
        }

        deinit { buffer.deallocate() }

        var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[..<count]) }

        func append(_ bytes: UnsafeRawBufferPointer) {
            if count + bytes.count > buffer.count {
                let grown = UnsafeMutableRawBufferPointer.allocate(
                    byteCount: max(buffer.count * 2, count + bytes.count), alignment: 16)
                grown.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                buffer.deallocate()
                buffer = grown
            }
            UnsafeMutableRawBufferPointer(rebasing: buffer[count...]).copyMemory(from: bytes)
            count += bytes.count
        }
    }

    private let items: [BuildPlan.Item]
    private let isIncluded: @Sendable (BuildPlan.Item) -> Bool
    private let root: String
    private let compression: CompressionPolicy
    private let modificationTime: Int64
    private let condition = NSCondition()
    private var results: [Int: Result<Entry, HCPackError>] = [:]
    private var nextIndex = 0
    private var isCancelled = false
    /// Places for entries made and not yet taken; made at 0 and signalled, as libdispatch wants.
    private let ahead = DispatchSemaphore(value: 0)
    private let stopped = DispatchGroup()
    private let workerCount: Int

    /// Starts making the entries of the `items` that `isIncluded` picks (small files), relative to `root`.
    /// The items are shared, not copied: at 26,000 files a filtered copy was 2.6 MB.
    init(
        _ items: [BuildPlan.Item], including isIncluded: @escaping @Sendable (BuildPlan.Item) -> Bool, root: String,
        compression: CompressionPolicy, modificationTime: Int64
    ) {
        self.items = items
        self.isIncluded = isIncluded
        self.root = root
        self.compression = compression
        self.modificationTime = modificationTime
        for _ in 0..<Self.aheadCount { ahead.signal() }
        workerCount = items.contains(where: isIncluded) ? max(1, ProcessInfo.processInfo.activeProcessorCount) : 0
        for number in 0..<workerCount {
            stopped.enter()
            let thread = Thread { [self] in
                work()
                stopped.leave()
            }
            thread.name = "hcpack-deflate-\(number)"
            thread.start()
        }
    }

    /// The entry of `items[index]`, an included item; waits for it. Throws the error its file met. Entries are
    /// taken in the order of the items.
    func entry(of index: Int) throws(HCPackError) -> Entry {
        condition.lock()
        while results[index] == nil { condition.wait() }
        let result = results.removeValue(forKey: index)
        condition.unlock()
        ahead.signal()
        switch result {
        case .success(let entry)?: return entry
        case .failure(let error)?: throw error
        case nil: throw HCPackError(.io, "the entry maker lost its place; report this as a bug")
        }
    }

    /// Stops the workers (a build that failed needs nothing more) and waits for them.
    func cancel() {
        condition.lock()
        isCancelled = true
        condition.unlock()
        for _ in 0..<workerCount { ahead.signal() }
        stopped.wait()
    }

    private func work() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(Self.largestFile), alignment: 64)
        defer { buffer.deallocate() }
        while true {
            ahead.wait()
            condition.lock()
            while nextIndex < items.count && !isIncluded(items[nextIndex]) { nextIndex += 1 }
            let index = nextIndex
            let proceed = !isCancelled && index < items.count
            if proceed { nextIndex += 1 }
            condition.unlock()
            guard proceed else { return }
            let result: Result<Entry, HCPackError>
            do throws(HCPackError) {
                result = .success(try make(items[index], buffer: buffer))
            } catch {
                result = .failure(error)
            }
            condition.lock()
            results[index] = result
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Reads one file and writes its entry.
    private func make(_ item: BuildPlan.Item, buffer: UnsafeMutableRawBufferPointer) throws(HCPackError) -> Entry {
        let source = try PlannedSource(item, root: root)
        let data = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(item.size)])
        let count = try source.fill(data)
        try source.checkEnd(remaining: item.size - Int64(count))
        let head = UnsafeRawBufferPointer(rebasing: data[..<min(count, CompressionPolicy.sampleLength)])
        let local = RecordBytes(capacity: count + 256 + item.path.utf8.count)
        do throws(ArchiveError) {
            let writer = try ZipEntryWriter(
                ArchiveSink.fileEntry(
                    item.path, size: item.size, compression: compression.choose(head: head),
                    modificationTime: modificationTime)
            ) { (bytes: UnsafeRawBufferPointer) throws(ArchiveError) in local.append(bytes) }
            try writer.write(UnsafeRawBufferPointer(data))
            return Entry(local: local, central: try writer.finish(), size: item.size)
        } catch {
            throw HCPackError(.io, "\(source.path): \(error.message)", path: source.path)
        }
    }
}
