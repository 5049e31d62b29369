internal import CZstd
import FileSystemIO

/// Binary patches between two versions of a file, through libzstd's "patch from" mode: the old file (the
/// base) is the prefix the new one is compressed against, with long-distance matching over a window that
/// covers both, so a patch holds little more than the bytes that changed, compressed.
///
/// The only module that imports CZstd. The base and the result are mapped files (`MappedFile`), never copied;
/// applying writes the result straight into its mapping (`ZSTD_d_stableOutBuffer`: no window buffer of the
/// decoder's own), and dropping the pages already passed keeps a bounded part of either file resident.
public enum PatchCodec {
    /// The largest window a patch may use (2 GiB: `ZSTD_WINDOWLOG_MAX` on 64-bit).
    public static var largestWindowLog: Int { Int(czstd_windowlog_max()) }

    /// The window (a power of two, as its log) a patch from `baseSize` to `targetSize` bytes needs so every
    /// byte of the base stays reachable while the target is made: nil when that is over `limit`.
    /// The sizes are untrusted (a delta's plist): negative ones, or a sum past `Int64.max`, give nil.
    public static func windowLog(baseSize: Int64, targetSize: Int64, limit: Int = largestWindowLog) -> Int? {
        let (span, overflow) = baseSize.addingReportingOverflow(targetSize)
        let highest = min(limit, largestWindowLog)
        guard !overflow, baseSize >= 0, targetSize >= 0, span <= Int64(1) << highest else { return nil }
        var log = Int(czstd_windowlog_min())
        while (Int64(1) << log) < span { log += 1 }
        return log <= highest ? log : nil
    }

    /// The compression level for a file of `size` bytes: zstd's level 3 at every size. With long-distance
    /// matching over the base, stronger levels found no more of the kept bytes in the bench's corpus
    /// (bench/README.md, "Binary deltas"): 19 made the 40 JSON patches 4% smaller in 13 times the CPU time,
    /// 9 made the SQLite patch 6% larger in 6 times the time, and 19 took 9 minutes on the 256 MiB asset for a
    /// 13% larger patch than 3's.
    public static func level(forSize size: Int64) -> Int { 3 }

    /// The largest long-distance-matching table a patch is made with, as the log of its entries (8 bytes each:
    /// 2^20 is 8 MiB). zstd's default, windowLog - 7, is 64 MiB for the 2^30 window of a 256 MiB file; with
    /// 2^20 entries zstd indexes one position in 2^(windowLog - 20) instead of one in 128, which still finds
    /// every kept run of a few KiB (bench/README.md: the same patch bytes on the 256 MiB asset).
    public static let largestLDMHashLog = 20

    /// The long-distance table's size (log of its entries) for a patch with window `windowLog`: zstd's default
    /// below 2^27-byte windows, `largestLDMHashLog` from there. Making only: the decoder has no such table.
    public static func ldmHashLog(windowLog: Int) -> Int {
        max(Int(czstd_hashlog_min()), min(windowLog - 7, largestLDMHashLog))
    }

    /// The most bytes a frame header takes (RFC 8878: magic, descriptor, window, dictionary ID, content size):
    /// what `frameHeader` needs of a patch's start.
    public static let frameHeaderMaxSize = Int(ZSTD_FRAMEHEADERSIZE_MAX)

    /// The regular match finder's tables (log of their entries: hash, chain) for a patch with window
    /// `windowLog`: nil keeps the level's own (2^17 and 2^16 at level 3) for windows from 2^17 to 2^27.
    /// - Below 2^17 the tables are the window's size: the level's are larger than the whole window, and zstd
    ///   zeroes them for every patch (768 KiB, 192 fresh pages a process, for each of the json case's 40 patches
    ///   of 15 KiB files; the same patch bytes with 2^12 to 2^17 entries, bench/README.md).
    /// - From 2^28, 2^12: candidates are then recent positions. With the level's tables they lie anywhere
    ///   behind in a target of hundreds of MiB, each read of one maps a large folio of the page cache, and tens
    ///   of MiB of the target were resident between two page drops. Long-distance matching finds the kept runs
    ///   (the same patch bytes on the 256 MiB asset with either).
    public static func matchTableLogs(windowLog: Int) -> (hash: Int, chain: Int)? {
        if windowLog >= 28 { return (12, 12) }
        if windowLog < 17 { return (windowLog, windowLog - 1) }
        return nil
    }

    /// What a patch's frame header declares (`ZSTD_getFrameHeader`).
    public struct FrameHeader: Sendable, Equatable {
        /// The size of the file the patch makes; nil when the frame does not say.
        public var contentSize: Int64?
        /// The window the frame needs, in bytes.
        public var windowSize: Int64
        /// The dictionary the frame names; 0 for none, as a patch made against a prefix has.
        public var dictionaryID: UInt32 = 0
    }

    /// Reads the frame header at the start of `patch` (its first `frameHeaderMaxSize` bytes are enough); nil
    /// when it is not a complete zstd frame header.
    public static func frameHeader(_ patch: UnsafeRawBufferPointer) -> FrameHeader? {
        guard let start = patch.baseAddress else { return nil }
        var header = ZSTD_frameHeader()
        guard ZSTD_getFrameHeader(&header, start, patch.count) == 0, header.frameType == ZSTD_frame else { return nil }
        let size = header.frameContentSize
        return FrameHeader(
            contentSize: size == czstd_content_size_unknown() || size > UInt64(Int64.max) ? nil : Int64(size),
            windowSize: header.windowSize > UInt64(Int64.max) ? .max : Int64(header.windowSize),
            dictionaryID: UInt32(header.dictID))
    }

    /// Why a frame header does not fit the record of the patch it starts, without the base: nil when it fits.
    /// - Parameters:
    ///   - head: the patch's first bytes (all of them for a patch shorter than `frameHeaderMaxSize`).
    ///   - windowLog: the window the record declares.
    ///   - resultSize: the size the result must have.
    public static func headerMismatch(_ head: UnsafeRawBufferPointer, windowLog: Int, resultSize: Int64) -> PatchError? {
        guard let header = frameHeader(head) else {
            return PatchError(.corrupt, "does not start with a complete zstd frame header")
        }
        guard windowLog >= 0, windowLog <= largestWindowLog, header.windowSize <= Int64(1) << windowLog else {
            return PatchError(.window, "the frame needs a \(header.windowSize)-byte window, over the declared 2^\(windowLog)")
        }
        guard header.contentSize == resultSize else {
            return PatchError(.size, "the frame makes \(header.contentSize.map(String.init) ?? "an undeclared number of") bytes, not the recorded \(resultSize)")
        }
        guard header.dictionaryID == 0 else {
            return PatchError(.corrupt, "the frame names dictionary \(header.dictionaryID); a patch's only dictionary is its base")
        }
        return nil
    }

    /// Makes the patch that turns `base` into `target`, writing it to `output` (a descriptor open for writing).
    /// - Parameters:
    ///   - windowLog: from `windowLog(baseSize:targetSize:)`; recorded in the frame, which declares it.
    ///   - level: zstd's compression level (`level(forSize:)`).
    /// - Returns: the patch's size in bytes.
    /// - Throws: `PatchError` (`.library` for a libzstd failure, `.io` for a write that failed).
    public static func makePatch(
        base: MappedFile, target: MappedFile, windowLog: Int, level: Int, output: Int32, outputPath: String
    ) throws(PatchError) -> Int64 {
        var written: Int64 = 0
        // After each slice of input every page of both files is dropped: the match finder reads candidates
        // anywhere behind in the target (and the base), each read maps a whole large folio of the page cache,
        // and with 1 MiB slices 53 MiB of the 256 MiB asset's target were resident in 650 pieces between two drops.
        try base.releasingWhile { () throws(PatchError) in
            try makePatch(
                base: base.bytes, target: target.bytes, windowLog: windowLog, level: level,
                write: { (bytes) throws(PatchError) in
                    do throws(HCPackError) {
                        try Descriptor.writeAll(output, bytes, path: outputPath)
                    } catch {
                        throw PatchError(.io, error.message)
                    }
                    written += Int64(bytes.count)
                },
                passed: { consumed in
                    target.release(below: consumed)
                    base.release(below: base.count)
                })
        }
        return written
    }

    /// Makes the patch that turns `base` into `target`, both in memory, and returns it (small files: a delta
    /// of many small changed files makes them without a file each; `PatchMaker` makes many with one context).
    public static func makePatch(base: [UInt8], target: [UInt8], windowLog: Int, level: Int) throws(PatchError) -> [UInt8] {
        try PatchMaker().makePatch(base: base, target: target, windowLog: windowLog, level: level)
    }

    /// The one way patches are made: `write` gets the patch's bytes in order, `passed` how much of the target
    /// was compressed after each slice of it. `reused`: a context to reset and use instead of a new one.
    fileprivate static func makePatch(
        base: UnsafeRawBufferPointer, target: UnsafeRawBufferPointer, windowLog: Int, level: Int,
        reusing reused: OpaquePointer? = nil, write: (UnsafeRawBufferPointer) throws(PatchError) -> Void, passed: (Int) -> Void
    ) throws(PatchError) {
        let context: OpaquePointer
        if let reused {
            context = reused
            try check(ZSTD_CCtx_reset(reused, ZSTD_reset_session_and_parameters), "reset the context")
        } else {
            guard let made = ZSTD_createCCtx() else { throw PatchError(.library, "out of memory for a zstd context") }
            context = made
        }
        defer { if reused == nil { ZSTD_freeCCtx(context) } }
        try check(ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, Int32(level)), "set the level")
        try check(ZSTD_CCtx_setParameter(context, ZSTD_c_windowLog, Int32(windowLog)), "set the window")
        try check(ZSTD_CCtx_setParameter(context, ZSTD_c_enableLongDistanceMatching, 1), "enable long-distance matching")
        try check(
            ZSTD_CCtx_setParameter(context, ZSTD_c_ldmHashLog, Int32(ldmHashLog(windowLog: windowLog))),
            "size the long-distance table")
        if let tables = matchTableLogs(windowLog: windowLog) {
            try check(ZSTD_CCtx_setParameter(context, ZSTD_c_hashLog, Int32(tables.hash)), "size the match finder")
            try check(ZSTD_CCtx_setParameter(context, ZSTD_c_chainLog, Int32(tables.chain)), "size the match finder")
        }
        // No frame checksum: install checks the result's SHA-256, and the 4 bytes a frame were 8% of the json
        // case's patches (bench/README.md, "json's size and making time").
        try check(ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 0), "leave out the checksum")
        try check(ZSTD_CCtx_setParameter(context, czstd_c_stable_in_buffer(), 1), "reference the input")
        try check(ZSTD_CCtx_setPledgedSrcSize(context, UInt64(target.count)), "declare the size")
        try check(ZSTD_CCtx_refPrefix(context, base.baseAddress, base.count), "reference the base")

        // As large as the target's compressed form may be, up to 1 MiB.
        let chunk = min(1 << 20, ZSTD_compressBound(target.count))
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var input = ZSTD_inBuffer(src: target.baseAddress, size: 0, pos: 0)
        // The input grows a slice at a time (allowed with a stable input buffer).
        let slice = 256 << 10
        while true {
            input.size = min(target.count, input.size + slice)
            let last = input.size == target.count
            while true {
                var out = ZSTD_outBuffer(dst: buffer, size: chunk, pos: 0)
                let remaining = ZSTD_compressStream2(context, &out, &input, last ? ZSTD_e_end : ZSTD_e_continue)
                try check(remaining, "compress")
                if out.pos > 0 { try write(UnsafeRawBufferPointer(start: buffer, count: out.pos)) }
                if last ? remaining == 0 : input.pos == input.size { break }
            }
            passed(input.pos)
            if last { break }
        }
    }

    /// Applies `patch` to `base`, writing the result into `output`, whose size is the one the patch must make.
    /// - Parameters:
    ///   - windowLog: the window the patch declares; a frame that needs a larger one is refused
    ///     (`ZSTD_d_windowLogMax`), so the patch cannot ask for more memory than it said.
    /// - Throws: `PatchError`: `.window` for a frame over the declared window, `.size` for a frame that declares
    ///   or makes another size than `output`'s, `.corrupt` for anything else libzstd refuses (a damaged frame,
    ///   a dictionary ID, a checksum mismatch, trailing bytes, a truncated patch).
    ///   - produced: called with each run of result bytes as it is made, in order (to hash it without reading
    ///     the result again).
    public static func applyPatch(
        base: MappedFile, patch: MappedFile, windowLog: Int, output: MappedFile,
        produced: ((UnsafeRawBufferPointer) -> Void)? = nil
    ) throws(PatchError) {
        try apply(
            base: base.bytes, patch: patch.bytes, windowLog: windowLog,
            output: output.mutableBytes, produced: produced,
            passed: { made, read in
                output.release(below: made)
                base.release(below: base.count)
                patch.release(below: read)
            })
    }

    /// Applies `patch` to `base`, all three in memory (a patch group's bases and results, bounded by its
    /// window: docs/format.md), with the same checks as the mapped form.
    public static func applyPatch(
        base: UnsafeRawBufferPointer, patch: UnsafeRawBufferPointer, windowLog: Int, output: UnsafeMutableRawBufferPointer
    ) throws(PatchError) {
        try apply(base: base, patch: patch, windowLog: windowLog, output: output, produced: nil, passed: { _, _ in })
    }

    /// The byte ranges of the zstd frames `bytes` holds one after another (a patch group's entry); nil unless it
    /// is exactly whole frames, at most `limit` of them.
    public static func frames(_ bytes: UnsafeRawBufferPointer, limit: Int) -> [Range<Int>]? {
        var ranges: [Range<Int>] = []
        var offset = 0
        while offset < bytes.count {
            guard ranges.count < limit, let start = bytes.baseAddress else { return nil }
            let size = ZSTD_findFrameCompressedSize(start + offset, bytes.count - offset)
            guard ZSTD_isError(size) == 0, size > 0, size <= bytes.count - offset else { return nil }
            ranges.append(offset..<(offset + size))
            offset += size
        }
        return ranges
    }

    /// The one way patches are applied: `passed` is told, every 8 MiB of result, how much was made and read.
    private static func apply(
        base: UnsafeRawBufferPointer, patch bytes: UnsafeRawBufferPointer, windowLog: Int, output: UnsafeMutableRawBufferPointer,
        produced: ((UnsafeRawBufferPointer) -> Void)?, passed: (_ made: Int, _ read: Int) -> Void
    ) throws(PatchError) {
        if let mismatch = headerMismatch(bytes, windowLog: windowLog, resultSize: Int64(output.count)) { throw mismatch }
        guard let start = bytes.baseAddress, ZSTD_findFrameCompressedSize(start, bytes.count) == bytes.count else {
            throw PatchError(.corrupt, "the patch is not exactly one zstd frame (truncated, or bytes after it)")
        }
        guard let context = ZSTD_createDCtx() else { throw PatchError(.library, "out of memory for a zstd context") }
        defer { ZSTD_freeDCtx(context) }
        try check(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, Int32(max(windowLog, Int(czstd_windowlog_min())))), "bound the window")
        try check(ZSTD_DCtx_setParameter(context, czstd_d_stable_out_buffer(), 1), "write in place")
        try check(ZSTD_DCtx_refPrefix(context, base.baseAddress, base.count), "reference the base")

        var out = ZSTD_outBuffer(dst: output.baseAddress, size: output.count, pos: 0)
        var input = ZSTD_inBuffer(src: start, size: 0, pos: 0)
        // Small slices of input: a few bytes of patch can make megabytes (a block of matches is 128 KiB from a
        // dozen bytes), and pages are dropped between calls only.
        let slice = 1 << 10
        var released = 0
        var reported = 0
        while true {
            if input.pos == input.size {
                guard input.size < bytes.count else { throw PatchError(.corrupt, "the patch ends before its frame does") }
                input.size = min(bytes.count, input.size + slice)
            }
            let remaining = ZSTD_decompressStream(context, &out, &input)
            if ZSTD_isError(remaining) != 0 {
                switch ZSTD_getErrorCode(remaining) {
                case ZSTD_error_dstSize_tooSmall:
                    throw PatchError(.size, "the frame makes more than the recorded \(output.count) bytes")
                case ZSTD_error_frameParameter_windowTooLarge:
                    throw PatchError(.window, "the frame needs a window over the declared 2^\(windowLog) bytes")
                default:
                    throw PatchError(.corrupt, String(cString: ZSTD_getErrorName(remaining)))
                }
            }
            if let produced, out.pos > reported {
                produced(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(output)[reported..<out.pos]))
                reported = out.pos
            }
            if remaining == 0 { break }
            if out.pos - released >= 8 << 20 {
                passed(out.pos, input.pos)
                released = out.pos
            }
        }
        guard out.pos == out.size else {
            throw PatchError(.size, "the frame made \(out.pos) bytes, not the recorded \(output.count)")
        }
        guard input.pos == bytes.count else { throw PatchError(.corrupt, "bytes after the patch's frame") }
    }

    static func check(_ code: Int, _ operation: String) throws(PatchError) {
        if ZSTD_isError(code) != 0 {
            throw PatchError(.library, "libzstd could not \(operation): \(String(cString: ZSTD_getErrorName(code)))")
        }
    }
}

/// Makes patches in memory one after another with one zstd context, reset between them: a context made and
/// freed per patch was a fifth of the time of the json case's 40 patches of 15 KiB (bench/README.md).
/// Not `Sendable`: one maker belongs to one thread.
public final class PatchMaker {
    private var context: OpaquePointer?

    public init() {}

    deinit { if let context { ZSTD_freeCCtx(context) } }

    /// As `PatchCodec.makePatch(base:target:windowLog:level:)`.
    public func makePatch(base: [UInt8], target: [UInt8], windowLog: Int, level: Int) throws(PatchError) -> [UInt8] {
        if context == nil {
            guard let made = ZSTD_createCCtx() else { throw PatchError(.library, "out of memory for a zstd context") }
            context = made
        }
        var patch: [UInt8] = []
        var failure: PatchError?
        base.withUnsafeBytes { base in
            target.withUnsafeBytes { target in
                do throws(PatchError) {
                    try PatchCodec.makePatch(
                        base: base, target: target, windowLog: windowLog, level: level, reusing: context,
                        write: { bytes in patch += bytes }, passed: { _ in })
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
        return patch
    }
}

/// Why a patch could not be made or applied.
public struct PatchError: Error, Sendable {
    /// What went wrong, for the caller's verdict.
    public enum Kind: Sendable {
        /// The frame needs a larger window than declared.
        case window
        /// The frame declares or makes another size than recorded.
        case size
        /// Not a well-formed single zstd frame for this base (damaged, truncated, trailing bytes, checksum).
        case corrupt
        /// libzstd refused a setting or ran out of memory.
        case library
        /// Writing the patch failed.
        case io
    }
    /// What went wrong.
    public var kind: Kind
    /// libzstd's or the writer's message.
    public var message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
}
