import ArchiveIO
import Digest
import Dispatch
import Foundation
import Synchronization


/// Hashes an archive whose first file is a reservation by reading it back right behind its writer, on a
/// thread of its own: it waits for the first file's final bytes (`finalFirstFile`, which waits for the
/// sources' digests), writes them over the reservation once the writer is past it, then follows the file
/// as it grows, until the writer says how long it is (`finish(length:)`).
///
/// Reading back from the page cache costs a copy, but it keeps the SHA-256 off both the writing thread and
/// the thread that runs libarchive; hashing on either made it the one everything waited for.
final class ArchiveFollower: @unchecked Sendable {
    // @unchecked: the thread owns its descriptor; everything shared is behind the mutex or a semaphore.
    private struct State {
        var finalLength: Int64?
        var stopped = false
        var checksums: (reserved: UInt32, final: UInt32)?
        var outcome: Result<[UInt8], HCPackError>?
    }
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let firstFileSettled = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private var finished = false

    /// How long the thread sleeps when it has caught up with the writer.
    private static let pollInterval = DispatchTimeInterval.milliseconds(2)

    /// Starts following the archive open as `original` (the thread reads and writes through a duplicate).
    /// - Parameters:
    ///   - name: the reserved first file, checked in its header.
    ///   - reserved: its bytes as written.
    ///   - finalFirstFile: its final bytes (a reservation of `reserved`); may wait, and its error fails the build.
    init(
        _ original: Int32, path: String, name: String, reserved: [UInt8],
        finalFirstFile: @escaping @Sendable () throws(HCPackError) -> FilledReservation
    ) {
        let duplicate = Result { () throws(HCPackError) in try Descriptor.duplicate(original, path: path) }
        let thread = Thread { [self] in
            let outcome: Result<[UInt8], HCPackError>
            do throws(HCPackError) {
                let descriptor = try duplicate.get()
                defer { Descriptor.release(descriptor) }
                outcome = .success(
                    try follow(descriptor, path: path, name: name, reserved: reserved, finalFirstFile: finalFirstFile))
            } catch {
                outcome = .failure(error)
            }
            let settled = state.withLock { state -> Bool in
                state.outcome = outcome
                return state.checksums != nil
            }
            if !settled { firstFileSettled.signal() }
            done.signal()
        }
        thread.name = "hcpack-follow"
        thread.start()
    }

    deinit {
        if !finished { stop() }
    }

    /// The first file's CRC-32 as reserved and as final, once its final bytes are known; nil when they could
    /// not be made (`finish` throws why).
    func firstFileChecksums() -> (reserved: UInt32, final: UInt32)? {
        firstFileSettled.wait()
        firstFileSettled.signal()  // for any later caller
        return state.withLock { $0.checksums }
    }

    /// The archive is complete at `length` bytes: hashes up to there and returns its SHA-256.
    func finish(length: Int64) throws(HCPackError) -> [UInt8] {
        state.withLock { $0.finalLength = length }
        wake.signal()
        done.wait()
        finished = true
        switch state.withLock({ $0.outcome }) {
        case .success(let digest)?: return digest
        case .failure(let error)?: throw error
        case nil: return []  // not reached: the thread sets it before `done`
        }
    }

    /// Abandons the archive: the thread stops without waiting for anything more.
    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
        finished = true
    }

    private func follow(
        _ descriptor: Int32, path: String, name: String, reserved: [UInt8],
        finalFirstFile: @Sendable () throws(HCPackError) -> FilledReservation
    ) throws(HCPackError) -> [UInt8] {
        let final = try finalFirstFile()
        let finalCRC = final.checksum()
        state.withLock { $0.checksums = (CRC32.checksum(reserved), finalCRC) }
        firstFileSettled.signal()

        // Past the first file's header (extra field at most 65,535 bytes), data and descriptor (at most 24).
        let pastFirstFile = Int64(30 + name.utf8.count + 65_535 + reserved.count + 24)
        _ = try available(descriptor, path: path, atLeast: pastFirstFile)
        try ZipEntryRewrite.replaceFirstEntryData(in: descriptor, path: path, name: name, with: final, finalCRC: finalCRC)

        let hasher = Digest.Hasher(.sha256)
        let file = PositionedFile(descriptor: descriptor, path: path)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var hashed: Int64 = 0
        while true {
            let (length, complete) = try available(descriptor, path: path, atLeast: hashed + 1)
            try hasher.update(contentsOf: file, range: hashed..<length, buffer: buffer)
            hashed = length
            if complete { return hasher.finalize() }
        }
    }

    /// Waits until the file holds at least `wanted` bytes or is complete; returns its length and whether it is
    /// complete. Throws once the archive is abandoned.
    private func available(_ descriptor: Int32, path: String, atLeast wanted: Int64) throws(HCPackError) -> (Int64, Bool) {
        while true {
            let (finalLength, stopped) = state.withLock { ($0.finalLength, $0.stopped) }
            if stopped { throw HCPackError(.io, "\(path): abandoned", path: path) }
            if let finalLength { return (finalLength, true) }
            let size = try Descriptor.size(descriptor, path: path)
            if size >= wanted { return (size, false) }
            _ = wake.wait(timeout: .now() + Self.pollInterval)
        }
    }
}
