import ArchiveIO
import Dispatch
import Foundation

/// Makes the zip entries of a build's small files on every core, ahead of the thread that assembles the
/// archive: each file is read (as planned: `PlannedSource`), its compression chosen, and the worker's own
/// libarchive writer (`ZipRunWriter`) writes its local record into memory; the central records come from each
/// worker's writer at the end (`centralRecords()`). libarchive deflates on the thread that calls it, and
/// deflate was most of a build's CPU, on one core, while the other waited (bench/README.md, issue 16).
///
/// Entries are taken in the order of the items (`entry(of:)`), whichever worker made them, and are the bytes a
/// single writer makes, so the archive does not depend on the number of cores or on timing. Bounded memory:
/// at most `aheadCount` entries of at most `largestFile` bytes each are made and not yet taken.
final class PreparedEntries: @unchecked Sendable {
    // @unchecked: `results`, `nextBatch`, `isCancelled` and `runRecords` are behind `condition`; `items`,
    // `included` and the settings never change; `taken` is the assembling thread's.

    /// A file larger than this is copied by the assembling thread, streamed: no whole copy in memory.
    static let largestFile: Int64 = 64 << 10
    /// How many entries may be made and not yet taken.
    static let aheadCount = 64

    /// One file's entry: its local record (header, data, descriptor), and where its central record is.
    struct Entry: Sendable {
        var local: [UInt8]
        /// The worker whose run wrote it, and its position in that run (`centralRecords()`).
        var run: Int
        var positionInRun: Int
    }

    private let items: [BuildPlan.Item]
    /// The positions in `items` of the files made here, in order.
    private let included: [Int]
    private let root: String
    private let compression: CompressionPolicy
    private let modificationTime: Int64
    private let condition = NSCondition()
    private var results: [Int: Result<Entry, HCPackError>] = [:]
    /// The next batch of `included` to claim.
    private var nextBatch = 0
    private var isCancelled = false
    /// Each worker's central records, once it has stopped.
    private var runRecords: [Int: Result<ZipCentralRecords, HCPackError>] = [:]
    /// Batches that may be claimed and not yet taken; made at 0 and signalled, as libdispatch wants.
    private let ahead = DispatchSemaphore(value: 0)
    private let stopped = DispatchGroup()
    private let workerCount: Int

    // The assembling thread's own: how many entries it has taken.
    private var taken = 0

    /// Entries are claimed, made and handed over this many at a time: one lock and one wake-up per file cost
    /// more than its copying (20,000 files of 4 KB: the workers were half idle).
    static let batchSize = 8

    /// Starts making the entries of the `items` that `isIncluded` picks (small files), relative to `root`.
    /// The items are shared, not copied: at 26,000 files a filtered copy was 2.6 MB.
    init(
        _ items: [BuildPlan.Item], including isIncluded: (BuildPlan.Item) -> Bool, root: String,
        compression: CompressionPolicy, modificationTime: Int64
    ) {
        self.items = items
        included = items.indices.filter { isIncluded(items[$0]) }
        self.root = root
        self.compression = compression
        self.modificationTime = modificationTime
        for _ in 0..<(Self.aheadCount / Self.batchSize) { ahead.signal() }
        // No more workers than batches: a delta of two small files started one that found nothing to do.
        let batches = (included.count + Self.batchSize - 1) / Self.batchSize
        workerCount = min(batches, max(1, ProcessInfo.processInfo.activeProcessorCount))
        // One batch is made here, before returning: a thread for it cost more than its deflating.
        if batches == 1 {
            stopped.enter()
            work(0)
            stopped.leave()
            return
        }
        for number in 0..<workerCount {
            stopped.enter()
            WorkerThread.start(name: "hcpack-deflate-\(number)") { [self] in
                work(number)
                stopped.leave()
            }
        }
    }

    /// The entry of `items[index]`, an included item; waits for it. Throws the error its file met. Entries are
    /// taken in the order of the items.
    func entry(of index: Int) throws(HCPackError) -> Entry {
        condition.lock()
        while results[index] == nil { condition.wait() }
        let result = results.removeValue(forKey: index)
        condition.unlock()
        taken += 1
        if taken % Self.batchSize == 0 || taken == included.count { ahead.signal() }
        switch result {
        case .success(let entry)?: return entry
        case .failure(let error)?: throw error
        case nil: throw HCPackError(.io, "the entry maker lost its place; report this as a bug")
        }
    }

    /// The central records of every worker's run, by worker; once every entry has been taken. Waits for the
    /// workers to stop.
    func centralRecords() throws(HCPackError) -> [ZipCentralRecords] {
        stopped.wait()
        condition.lock()
        defer { condition.unlock() }
        var records: [ZipCentralRecords] = []
        for number in 0..<workerCount {
            switch runRecords[number] {
            case .success(let run)?: records.append(run)
            case .failure(let error)?: throw error
            case nil: throw HCPackError(.io, "a deflating worker ended without its records; report this as a bug")
            }
        }
        runRecords = [:]
        return records
    }

    /// Stops the workers (a build that failed needs nothing more) and waits for them.
    func cancel() {
        condition.lock()
        isCancelled = true
        condition.unlock()
        for _ in 0..<workerCount { ahead.signal() }
        stopped.wait()
    }

    private func work(_ number: Int) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(Self.largestFile), alignment: 64)
        defer { buffer.deallocate() }
        let run: ZipRunWriter
        do {
            run = try ZipRunWriter()
        } catch {
            stopRun(number, .failure(HCPackError(.io, "cannot start a zip writer: \(error.message)")))
            return
        }
        var written = 0
        var made: [(Int, Result<Entry, HCPackError>)] = []
        while true {
            ahead.wait()
            condition.lock()
            let batch = nextBatch * Self.batchSize
            let proceed = !isCancelled && batch < included.count
            if proceed { nextBatch += 1 }
            condition.unlock()
            guard proceed else {
                do {
                    stopRun(number, .success(try run.finish()))
                } catch {
                    stopRun(number, .failure(HCPackError(.io, "finishing a run of zip entries: \(error.message)")))
                }
                return
            }
            for index in included[batch..<min(batch + Self.batchSize, included.count)] {
                do throws(HCPackError) {
                    made.append((index, .success(try make(items[index], buffer: buffer, run: run, number: number, position: written))))
                    written += 1
                } catch {
                    made.append((index, .failure(error)))
                }
            }
            condition.lock()
            for (index, result) in made { results[index] = result }
            condition.broadcast()
            condition.unlock()
            made.removeAll(keepingCapacity: true)
        }
    }

    private func stopRun(_ number: Int, _ records: Result<ZipCentralRecords, HCPackError>) {
        condition.lock()
        runRecords[number] = records
        condition.unlock()
    }

    /// Reads one file and writes its entry, the `position`-th of worker `number`'s run.
    private func make(
        _ item: BuildPlan.Item, buffer: UnsafeMutableRawBufferPointer, run: ZipRunWriter, number: Int, position: Int
    ) throws(HCPackError) -> Entry {
        let data = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(item.size)])
        let count: Int
        let path: String
        if let bytes = item.bytes, bytes.count == data.count {
            data.copyBytes(from: bytes)
            count = bytes.count
            path = root + "/" + item.sourceRelative
        } else {
            let source = try PlannedSource(item, root: root)
            count = try source.fill(data)
            try source.checkEnd(remaining: item.size - Int64(count))
            path = source.path
        }
        let head = UnsafeRawBufferPointer(rebasing: data[..<min(count, CompressionPolicy.sampleLength)])
        var local: [UInt8] = []
        local.reserveCapacity(count + 256 + item.path.utf8.count)
        let chosen = compression.choose(head: head)
        // A stored entry records its CRC-32 before its data: no data descriptor (`ArchiveWriter.begin`).
        let crc32 = chosen == .store ? CRC32.update(0, with: UnsafeRawBufferPointer(rebasing: data[..<count])) : nil
        do throws(ArchiveError) {
            try run.begin(
                ArchiveSink.fileEntry(
                    item.path, size: item.size, compression: chosen, modificationTime: modificationTime, crc32: crc32)
            ) { (bytes: UnsafeRawBufferPointer) throws(ArchiveError) in local.append(contentsOf: bytes) }
            try run.write(UnsafeRawBufferPointer(data))
            try run.end()
            return Entry(local: local, run: number, positionInRun: position)
        } catch {
            throw HCPackError(.io, "\(path): \(error.message)", path: path)
        }
    }
}
