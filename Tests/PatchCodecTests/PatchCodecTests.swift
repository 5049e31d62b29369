import FileSystemIO
import Foundation
import PatchCodec
import Testing

@Suite("PatchCodec")
struct PatchCodecTests {
    /// A temporary folder with `base` and `target` written, a patch made between them, and helpers to apply it.
    final class Scratch {
        let path: String
        let folder: DirectoryHandle

        init() throws {
            path = NSTemporaryDirectory() + "patchcodec-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            folder = try DirectoryHandle.open(path)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        func write(_ name: String, _ bytes: [UInt8]) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: path + "/" + name))
        }
        func map(_ name: String) throws -> MappedFile {
            let descriptor = try #require(try folder.openForReading(name))
            defer { Descriptor.release(descriptor) }
            return try MappedFile(reading: descriptor, path: path + "/" + name)
        }
        func makePatch(_ base: String, _ target: String, to name: String, windowLog wanted: Int? = nil) throws
            -> (size: Int64, windowLog: Int)
        {
            let base = try map(base)
            let target = try map(target)
            let needed = try #require(PatchCodec.windowLog(baseSize: Int64(base.count), targetSize: Int64(target.count)))
            let windowLog = max(needed, wanted ?? needed)
            let output = try folder.createFileForMapping(name)
            defer { Descriptor.release(output) }
            let size = try PatchCodec.makePatch(
                base: base, target: target, windowLog: windowLog, level: PatchCodec.level(forSize: Int64(target.count)),
                output: output, outputPath: name)
            return (size, windowLog)
        }
        /// Applies `patch` to `base` into a new file `name` of `size` bytes; returns its bytes.
        func apply(_ base: String, _ patch: String, windowLog: Int, size: Int, to name: String) throws -> [UInt8] {
            let descriptor = try folder.createFileForMapping(name)
            defer { Descriptor.release(descriptor) }
            do {
                let output = try MappedFile(writing: descriptor, count: size, path: name)
                try PatchCodec.applyPatch(base: try map(base), patch: try map(patch), windowLog: windowLog, output: output)
            }
            return try [UInt8](Data(contentsOf: URL(fileURLWithPath: path + "/" + name)))
        }
    }

    static func pseudoRandom(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }

    @Test("A patch remakes the new file exactly and is far smaller than it", arguments: [0, 1, 4096, 3 << 20])
    func roundTrip(size: Int) throws {
        let scratch = try Scratch()
        let base = Self.pseudoRandom(size, seed: 1)
        var target = base
        // A few rewritten bytes and an insertion in the middle: what a changed asset looks like.
        let inserted = Self.pseudoRandom(min(size / 64 + 1, 4096), seed: 2)
        target.insert(contentsOf: inserted, at: size / 2)
        for index in stride(from: 0, to: target.count, by: 7919) { target[index] ^= 0x5a }
        try scratch.write("base", base)
        try scratch.write("target", target)
        let (patchSize, windowLog) = try scratch.makePatch("base", "target", to: "patch")
        if size >= 4096 { #expect(patchSize < Int64(target.count) / 4) }
        let made = try scratch.apply("base", "patch", windowLog: windowLog, size: target.count, to: "made")
        #expect(made == target)
    }

    @Test("A file of hundreds of MiB gets a capped long-distance table and small match tables, a small file tables of its window's size; the level's own between")
    func largeWindowSettings() {
        #expect(PatchCodec.ldmHashLog(windowLog: 30) == PatchCodec.largestLDMHashLog)
        #expect(PatchCodec.ldmHashLog(windowLog: 26) == 19)
        #expect(PatchCodec.ldmHashLog(windowLog: 10) >= 6)
        #expect(PatchCodec.matchTableLogs(windowLog: 17) == nil)
        #expect(PatchCodec.matchTableLogs(windowLog: 27) == nil)
        #expect(PatchCodec.matchTableLogs(windowLog: 28).map { [$0.hash, $0.chain] } == [12, 12])
        #expect(PatchCodec.matchTableLogs(windowLog: 15).map { [$0.hash, $0.chain] } == [15, 14])
    }

    @Test("A patch made with a large file's settings (window 2^28 and up) remakes the new file exactly")
    func largeWindowRoundTrip() throws {
        // The settings depend on the window alone, so a small file with a declared 2^28 window takes that path
        // (libzstd accepts the tables, the decoder the window) without writing hundreds of MiB.
        let scratch = try Scratch()
        let base = Self.pseudoRandom(1 << 20, seed: 7)
        var target = base
        target.insert(contentsOf: Self.pseudoRandom(8192, seed: 8), at: 300_000)
        for index in stride(from: 0, to: target.count, by: 4099) { target[index] &+= 1 }
        try scratch.write("base", base)
        try scratch.write("target", target)
        let (patchSize, windowLog) = try scratch.makePatch("base", "target", to: "patch", windowLog: 28)
        #expect(windowLog == 28)
        #expect(patchSize < Int64(target.count) / 4)
        let made = try scratch.apply("base", "patch", windowLog: windowLog, size: target.count, to: "made")
        #expect(made == target)
    }

    @Test("A patch refuses a wrong size, a larger window, another base, truncation and trailing bytes")
    func hostile() throws {
        let scratch = try Scratch()
        let base = Self.pseudoRandom(200_000, seed: 3)
        var target = base
        target.replaceSubrange(50_000..<50_100, with: Self.pseudoRandom(300, seed: 4))
        try scratch.write("base", base)
        try scratch.write("target", target)
        let (_, windowLog) = try scratch.makePatch("base", "target", to: "patch")
        let patch = try [UInt8](Data(contentsOf: URL(fileURLWithPath: scratch.path + "/patch")))

        func refusal(_ run: () throws -> Void) -> PatchError.Kind? {
            do {
                try run()
                return nil
            } catch let error as PatchError {
                return error.kind
            } catch {
                return .io
            }
        }
        #expect(refusal { _ = try scratch.apply("base", "patch", windowLog: windowLog, size: target.count + 1, to: "a") } == .size)
        #expect(refusal { _ = try scratch.apply("base", "patch", windowLog: 10, size: target.count, to: "b") } == .window)
        // Another base of the same size makes another file: the frame has no checksum (install checks the
        // result's SHA-256, DeltaPatchTests' notTheBase), so the codec cannot tell.
        try scratch.write("other", Self.pseudoRandom(200_000, seed: 5))
        #expect(try scratch.apply("other", "patch", windowLog: windowLog, size: target.count, to: "c") != target)
        #expect(patch.withUnsafeBytes { $0[4] } & 0x04 == 0)  // Frame_Header_Descriptor: Content_Checksum_flag clear
        try scratch.write("cut", Array(patch.dropLast(9)))
        #expect(refusal { _ = try scratch.apply("base", "cut", windowLog: windowLog, size: target.count, to: "d") } == .corrupt)
        try scratch.write("long", patch + [0])
        #expect(refusal { _ = try scratch.apply("base", "long", windowLog: windowLog, size: target.count, to: "e") } == .corrupt)
        #expect(PatchCodec.frameHeader(patch.withUnsafeBytes { $0 })?.contentSize == Int64(target.count))
    }

    @Test("A frame with a checksum (zstd's command line writes one) applies, and a wrong checksum is refused")
    func checksummed() throws {
        let scratch = try Scratch()
        let base = Self.pseudoRandom(100_000, seed: 6)
        var target = base
        target.replaceSubrange(20_000..<20_050, with: Self.pseudoRandom(80, seed: 7))
        try scratch.write("base", base)
        try scratch.write("target", target)
        let zstd = Process()
        zstd.executableURL = URL(fileURLWithPath: "/usr/bin/zstd")
        zstd.arguments = ["-q", "-f", "--patch-from=" + scratch.path + "/base", scratch.path + "/target", "-o", scratch.path + "/patch"]
        try zstd.run()
        zstd.waitUntilExit()
        #expect(zstd.terminationStatus == 0)
        var patch = try [UInt8](Data(contentsOf: URL(fileURLWithPath: scratch.path + "/patch")))
        #expect(patch[4] & 0x04 != 0)
        let windowLog = try #require(PatchCodec.windowLog(baseSize: Int64(base.count), targetSize: Int64(target.count)))
        #expect(try scratch.apply("base", "patch", windowLog: windowLog, size: target.count, to: "made") == target)
        patch[patch.count - 1] ^= 0xFF
        try scratch.write("damaged", patch)
        #expect(throws: PatchError.self) { _ = try scratch.apply("base", "damaged", windowLog: windowLog, size: target.count, to: "bad") }
    }

    @Test("The window covers base and target, and is refused over the limit")
    func windows() {
        #expect(PatchCodec.windowLog(baseSize: 0, targetSize: 0) == 10)
        #expect(PatchCodec.windowLog(baseSize: 256 << 20, targetSize: 257 << 20) == 30)
        #expect(PatchCodec.windowLog(baseSize: 1 << 30, targetSize: 1 << 30) == 31)
        #expect(PatchCodec.windowLog(baseSize: 1 << 30, targetSize: (1 << 30) + 1) == nil)
        #expect(PatchCodec.windowLog(baseSize: 1 << 20, targetSize: 1 << 20, limit: 20) == nil)
    }

    @Test("Sizes from a hostile record give no window instead of trapping: a sum past 2^63, negative sizes")
    func untrustedSizes() {
        #expect(PatchCodec.windowLog(baseSize: .max, targetSize: 1) == nil)
        #expect(PatchCodec.windowLog(baseSize: 1 << 62, targetSize: 1 << 62) == nil)
        #expect(PatchCodec.windowLog(baseSize: 0, targetSize: .max) == nil)
        #expect(PatchCodec.windowLog(baseSize: -1, targetSize: 10) == nil)
        #expect(PatchCodec.windowLog(baseSize: .min, targetSize: .max, limit: 40) == nil)
    }

    /// A frame header: magic, descriptor, window descriptor (when not single-segment), dictionary ID, content size.
    static func header(singleSegment: Bool = false, windowLog: Int = 20, dictionaryID: UInt8? = nil, contentSize: UInt32? = 4096) -> [UInt8] {
        let sizeFlag: UInt8 = contentSize == nil ? 0 : 2  // 4 bytes (or, single-segment with flag 0, 1 byte)
        var bytes: [UInt8] = [0x28, 0xb5, 0x2f, 0xfd, sizeFlag << 6 | (singleSegment ? 0x20 : 0) | (dictionaryID == nil ? 0 : 1)]
        if !singleSegment { bytes.append(UInt8(windowLog - 10) << 3) }
        if let dictionaryID { bytes.append(dictionaryID) }
        if let contentSize { bytes += withUnsafeBytes(of: contentSize.littleEndian, Array.init) }
        return bytes
    }

    @Test("A frame header is held to its record without the base: window, content size, dictionary, a whole header")
    func headerChecks() {
        func mismatch(_ bytes: [UInt8], windowLog: Int = 20, size: Int64 = 4096) -> PatchError.Kind? {
            bytes.withUnsafeBytes { PatchCodec.headerMismatch($0, windowLog: windowLog, resultSize: size)?.kind }
        }
        #expect(mismatch(Self.header()) == nil)
        #expect(mismatch(Self.header(singleSegment: true)) == nil)
        #expect(mismatch(Self.header(windowLog: 21)) == .window)
        #expect(mismatch(Self.header(), windowLog: 19) == .window)
        #expect(mismatch(Self.header(), windowLog: 40) == .window)
        #expect(mismatch(Self.header(), size: 4097) == .size)
        #expect(mismatch(Self.header(contentSize: nil)) == .size)
        #expect(mismatch(Self.header(dictionaryID: 7)) == .corrupt)
        #expect(mismatch(Array(Self.header().prefix(7))) == .corrupt)  // cut inside the content size
        #expect(mismatch(Array("not a zstd frame".utf8)) == .corrupt)
        #expect(mismatch([]) == .corrupt)
        #expect(PatchCodec.frameHeaderMaxSize == 18)
    }
}
