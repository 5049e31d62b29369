import Digest
import FileSystemIO
import Foundation
@testable import HostedContent
import TestSupport
import Testing

/// `DownloadSink`: what it writes is what it was given, and its digest is the SHA-256 of exactly the bytes
/// before its position, whatever the sizes of the pieces and wherever a download starts over.
@Suite("fetch: download sink")
struct DownloadSinkTests {
    /// `count` random bytes, eight at a time (byte by byte took seconds in a debug build).
    static func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        let words = (0..<(count + 7) / 8).map { _ in generator.next() }
        return words.withUnsafeBytes { Array($0.prefix(count)) }
    }

    static func sha256(_ bytes: some Collection<UInt8>) -> String { Hasher.digest(.sha256, of: Array(bytes)).hexString }

    /// Gives `data` to the sink in pieces of the sizes `pieces` cycles through, as libcurl would.
    static func feed(_ sink: DownloadSink, _ data: [UInt8], pieces: [Int]) throws {
        var offset = 0
        var turn = 0
        while offset < data.count {
            let count = min(pieces[turn % pieces.count], data.count - offset)
            try data[offset..<(offset + count)].withUnsafeBytes { try sink.append($0) }
            offset += count
            turn += 1
        }
    }

    @Test(
        "pieces of any size, across buffer boundaries: the file and the digest are the bytes given",
        arguments: [[16 << 10], [1, 7, 16 << 10, 300 << 10], [DownloadSink.bufferSize], [3 << 20]])
    func roundTrip(pieces: [Int]) throws {
        let folder = TemporaryFolder()
        let file = try DirectoryHandle.open(folder.path).openForUpdate("d.download")
        defer { file.close() }
        let sink = DownloadSink()
        defer { sink.close() }
        sink.attach(file)
        // More than the sink's buffers together, and not a multiple of one.
        let data = Self.bytes(9 * DownloadSink.bufferSize + 12345)
        sink.begin(at: 0)
        try Self.feed(sink, data, pieces: pieces)
        #expect(sink.position == Int64(data.count))
        try sink.flush()
        #expect(sink.finalize() == Self.sha256(data))
        #expect(FileManager.default.contents(atPath: folder.url("d.download")).map { [UInt8]($0) } == data)
    }

    @Test("starting over at 0 forgets the bytes before; at another offset the digest no longer covers; rehash reads the file")
    func startOver() throws {
        let folder = TemporaryFolder()
        let file = try DirectoryHandle.open(folder.path).openForUpdate("d.download")
        defer { file.close() }
        let sink = DownloadSink()
        defer { sink.close() }
        sink.attach(file)
        let first = Self.bytes(DownloadSink.bufferSize + 99)
        try Self.feed(sink, first, pieces: [16 << 10])
        try sink.flush()
        try file.truncate(to: 0)
        sink.begin(at: 0)
        #expect(sink.position == 0)
        let second = Self.bytes(3 * DownloadSink.bufferSize + 1)
        try Self.feed(sink, second, pieces: [50_000])
        try sink.flush()
        #expect(sink.isCovering)
        #expect(sink.finalize() == Self.sha256(second))

        // A resumed file: its bytes on disk go through the digest first, then the new ones follow them.
        let resumed = try #require(FileManager.default.contents(atPath: folder.url("d.download")).map { [UInt8]($0) })
        try sink.rehash(length: Int64(resumed.count))
        #expect(sink.position == Int64(resumed.count))
        let tail = Self.bytes(DownloadSink.bufferSize / 2)
        try Self.feed(sink, tail, pieces: [16 << 10])
        try sink.flush()
        #expect(sink.finalize() == Self.sha256(resumed + tail))

        // Bytes written at an offset the digest did not follow: no digest, rather than a wrong one.
        sink.begin(at: 10)
        try Self.feed(sink, Self.bytes(100), pieces: [100])
        try sink.flush()
        #expect(!sink.isCovering)
        #expect(sink.finalize() == nil)
    }

    @Test("a file shorter than the length to rehash is an error that names it")
    func shrunk() throws {
        let folder = TemporaryFolder()
        folder.write("d.download", Self.bytes(1000))
        let file = try DirectoryHandle.open(folder.path).openForUpdate("d.download")
        defer { file.close() }
        let sink = DownloadSink()
        defer { sink.close() }
        sink.attach(file)
        let error = #expect(throws: HCPackError.self) { try sink.rehash(length: 5000) }
        #expect(error?.message.contains("d.download") == true)
    }
}
