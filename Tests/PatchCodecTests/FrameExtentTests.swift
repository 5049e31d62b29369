import Foundation
import PatchCodec
import Testing

/// `FrameExtent` against frames libzstd wrote (the `zstd` command): raw, RLE and compressed blocks, with and
/// without a checksum, fed whole, a byte at a time and in odd pieces.
@Suite("PatchCodec: where a zstd frame ends")
struct FrameExtentTests {
    /// `zstd` with `arguments` over `input`, its stdout.
    static func zstd(_ input: [UInt8], _ arguments: [String]) throws -> [UInt8] {
        let folder = NSTemporaryDirectory() + "frame-extent-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data(input).write(to: URL(fileURLWithPath: folder + "/in"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["zstd", "-q", "-f"] + arguments + [folder + "/in", "-o", folder + "/out"]
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "zstd failed")
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: folder + "/out")))
    }

    static func verdict(_ bytes: [UInt8], pieces: Int) -> FrameExtent.Verdict {
        var extent = FrameExtent()
        var offset = 0
        while offset < bytes.count {
            let count = min(pieces, bytes.count - offset)
            bytes[offset..<(offset + count)].withUnsafeBytes { extent.feed($0) }
            offset += count
        }
        return extent.verdict
    }

    static var inputs: [(String, [UInt8])] {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }  // raw blocks
        let zeros = [UInt8](repeating: 0, count: 400_000)  // RLE blocks
        let text = Array(String(repeating: "level 12, score 4500, name Ada\n", count: 20_000).utf8)  // compressed
        return [("random", random), ("zeros", zeros), ("text", text), ("empty", [])]
    }

    @Test("one frame, truncated, trailing bytes, a second frame, not a frame", arguments: [["--check"], ["--no-check"], ["-19", "--content-size"]])
    func verdicts(options: [String]) throws {
        for (name, input) in Self.inputs {
            let frame = try Self.zstd(input, options)
            for pieces in [1, 7, 4096, frame.count + 1] where pieces > 1 || frame.count < 50_000 {
                #expect(Self.verdict(frame, pieces: pieces) == .oneFrame, "\(name), pieces of \(pieces)")
                #expect(Self.verdict(Array(frame.dropLast()), pieces: pieces) == .truncated, "\(name), pieces of \(pieces)")
                #expect(Self.verdict(frame + [1, 2, 3, 4, 5], pieces: pieces) == .trailing(5), "\(name), pieces of \(pieces)")
                #expect(Self.verdict(frame + frame, pieces: pieces) == .trailing(Int64(frame.count)), "\(name), pieces of \(pieces)")
            }
        }
        #expect(Self.verdict(Array("PK\u{3}\u{4} not zstd".utf8), pieces: 3) == .malformed)
        #expect(Self.verdict([], pieces: 1) == .truncated)
    }

    @Test("a reserved block type or descriptor bit is malformed")
    func reserved() throws {
        let frame = try Self.zstd(Array("hello".utf8), ["--no-check", "--content-size"])
        var reservedBit = frame
        reservedBit[4] |= 0x08
        #expect(Self.verdict(reservedBit, pieces: 64) == .malformed)
        // The first block header follows the frame header: magic, descriptor, then the content size (single
        // segment, 1 byte for 5). Block type 3 is reserved.
        let headerLength = 4 + 1 + 1
        var reservedBlock = frame
        reservedBlock[headerLength] |= 0x06
        #expect(Self.verdict(reservedBlock, pieces: 64) == .malformed)
    }
}
