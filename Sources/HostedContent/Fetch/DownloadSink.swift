import Digest
import Dispatch
import Foundation
import Synchronization

/// Where a download's accepted bytes go: gathered into a few fixed buffers, each written to the partial file
/// with one `pwrite`, then hashed (SHA-256) on a thread of its own while the receiving thread goes on.
///
/// libcurl hands a body over 16 KiB at a time (`CURL_MAX_WRITE_SIZE`), and each piece cost one `pwrite` and
/// one SHA-256 update on the receiving thread, the hash as long as the write (0.3 s each for 256 MiB,
/// bench/README.md). Memory is bounded: when every buffer waits for the hash, `append` waits.
///
/// The digest covers the bytes from offset 0 to `position` when `isCovering`; a download that starts over at
/// another offset says otherwise. Owned by one receiving thread (a `Downloader`, which keeps one for all its
/// downloads: `--jobs` workers each allocate the buffers once); `close()` stops the worker.
final class DownloadSink: @unchecked Sendable {
    // @unchecked: a buffer is the receiving thread's until it is submitted, then the worker's until it frees
    // it (`free`); the rest is the receiving thread's.
    private enum Job: Sendable {
        case data(buffer: Int, count: Int)
        case reset
        case digest(DigestReply)
        case stop
    }

    private final class DigestReply: Sendable {
        let value = Mutex<[UInt8]>([])
        let done = DispatchSemaphore(value: 0)
    }

    /// Bytes a `pwrite` and a hash update take at most (larger writes did not cost less here).
    static let bufferSize = 256 << 10
    private static let bufferCount = 4
    private let buffers: [UnsafeMutableRawBufferPointer]
    private let free = DispatchSemaphore(value: DownloadSink.bufferCount)
    private let lanes = JobLanes<Job>(count: 1)
    private let stopped = DispatchSemaphore(value: 0)
    private var file: UpdatableFile?
    /// The buffer being filled and its bytes, not yet written.
    private var filling: (index: Int, used: Int)?
    private var nextBuffer = 0
    private var isClosed = false

    /// The offset of the next byte: every byte before it was written to the file or is in `filling`.
    private(set) var position: Int64 = 0
    /// Whether the digest covers exactly the bytes before `position`.
    private(set) var isCovering = true

    init() {
        buffers = (0..<Self.bufferCount).map { _ in
            UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 64)
        }
        WorkerThread.start(name: "hcpack-download-sha256") { [self] in work() }
    }

    deinit {
        for buffer in buffers { buffer.deallocate() }
    }

    /// The next bytes go to `file` (nil: none, its owner closes it), from offset 0, with the digest started
    /// over; bytes taken before and not written are dropped.
    func attach(_ file: UpdatableFile?) {
        if filling != nil { free.signal() }
        filling = nil
        self.file = file
        lanes.submit([.reset])
        position = 0
        isCovering = true
    }

    /// Stops the worker; call it on every path (the worker holds the sink until then).
    func close() {
        guard !isClosed else { return }
        isClosed = true
        // A buffer still being filled goes back: libdispatch traps when a semaphore is freed below its start.
        if filling != nil { free.signal() }
        filling = nil
        lanes.submit([.stop])
        stopped.wait()
    }

    /// The next bytes go at `offset`; the file must already end there. Any other offset than `position`
    /// starts the digest over (covering only from 0).
    func begin(at offset: Int64) {
        precondition(filling == nil, "DownloadSink.begin with bytes not yet written")
        if offset != position {
            lanes.submit([.reset])
            isCovering = offset == 0
            position = offset
        }
    }

    /// Takes `bytes` (copied: they may be reused once this returns), writing a buffer to the file when full.
    /// - Throws: the write's failure; the bytes of that buffer are then not in the file.
    func append(_ bytes: UnsafeRawBufferPointer) throws(HCPackError) {
        var offset = 0
        while offset < bytes.count {
            let (index, used) = filling ?? take()
            let count = min(Self.bufferSize - used, bytes.count - offset)
            UnsafeMutableRawBufferPointer(rebasing: buffers[index][used..<(used + count)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
            filling = (index, used + count)
            position += Int64(count)
            offset += count
            if used + count == Self.bufferSize { try flush() }
        }
    }

    /// Writes the bytes taken so far to the file.
    func flush() throws(HCPackError) {
        guard let (index, used) = filling else { return }
        filling = nil
        do {
            guard let file else { preconditionFailure("DownloadSink.flush without a file") }
            try file.write(UnsafeRawBufferPointer(rebasing: buffers[index][..<used]), at: position - Int64(used))
        } catch {
            // Not in the file: neither in the digest, and the position goes back to where the file ends.
            position -= Int64(used)
            free.signal()
            throw error
        }
        if isCovering {
            lanes.submit([.data(buffer: index, count: used)])
        } else {
            free.signal()
        }
    }

    /// The lowercase hex SHA-256 of the bytes before `position` (after `flush`), or nil when the digest does
    /// not cover them; then starts over at offset 0.
    func finalize() -> String? {
        precondition(filling == nil, "DownloadSink.finalize with bytes not yet written")
        let reply = DigestReply()
        lanes.submit([.digest(reply)])
        reply.done.wait()
        let covering = isCovering
        position = 0
        isCovering = true
        return covering ? reply.value.withLock { $0 }.hexString : nil
    }

    /// Starts the digest over with the file's first `length` bytes, read back (resuming, or a digest that
    /// does not cover what is on disk); the next bytes go after them.
    func rehash(length: Int64) throws(HCPackError) {
        precondition(filling == nil, "DownloadSink.rehash with bytes not yet written")
        guard let file else { preconditionFailure("DownloadSink.rehash without a file") }
        lanes.submit([.reset])
        isCovering = true
        position = 0
        while position < length {
            let (index, _) = take()
            let want = Int(min(Int64(Self.bufferSize), length - position))
            let count: Int
            do {
                count = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffers[index][..<want]), at: position)
            } catch {
                free.signal()
                throw error
            }
            guard count > 0 else {
                free.signal()
                throw HCPackError(.io, "\(file.path) shrank while it was read; run again", path: file.path)
            }
            lanes.submit([.data(buffer: index, count: count)])
            position += Int64(count)
        }
    }

    private func take() -> (index: Int, used: Int) {
        free.wait()
        defer { nextBuffer = (nextBuffer + 1) % Self.bufferCount }
        return (nextBuffer, 0)
    }

    private func work() {
        var hasher = Digest.Hasher(.sha256)
        while true {
            for job in lanes.take(0) {
                switch job {
                case .data(let index, let count):
                    hasher.update(UnsafeRawBufferPointer(rebasing: buffers[index][..<count]))
                    free.signal()
                case .reset:
                    hasher = Digest.Hasher(.sha256)
                case .digest(let reply):
                    let digest = hasher.finalize()
                    reply.value.withLock { $0 = digest }
                    hasher = Digest.Hasher(.sha256)
                    reply.done.signal()
                case .stop:
                    stopped.signal()
                    return
                }
            }
        }
    }
}
