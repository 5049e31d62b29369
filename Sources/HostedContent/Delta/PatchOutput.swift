import ArchiveIO

/// The bytes a delta's patches make, held to the limits the archive's own bytes meet (docs/install.md#limits),
/// so a few bytes of patch cannot fill DEST: each made file is an entry of `--max-bytes`'s per-entry limit,
/// made files and the archive's bytes together count against `--max-bytes`, and past `ratioGraceBytes` the
/// made bytes are at most `--max-ratio` times what they are made from, the patches and their bases (a patch
/// that repeats its base is honest; one that makes a gigabyte of zeros from nothing is a bomb).
///
/// Every size is a delta's untrusted claim: sums saturate at `Int64.max` instead of trapping.
struct PatchOutput: Equatable {
    /// The sizes of the files the patches make.
    private(set) var made: Int64 = 0
    /// The sizes of the patches and of the bases they apply to.
    private(set) var madeFrom: Int64 = 0

    /// Counts one patch: `result` bytes made from a `patch`-byte patch and a `base`-byte base.
    mutating func add(result: Int64, patch: Int64, base: Int64) {
        made = made.addingSaturated(result)
        madeFrom = madeFrom.addingSaturated(patch.addingSaturated(base))
    }

    /// This output with one patch more.
    func adding(result: Int64, patch: Int64, base: Int64) -> PatchOutput {
        var copy = self
        copy.add(result: result, patch: patch, base: base)
        return copy
    }

    /// Whether the made bytes pass `limits`' ratio: within the grace, or at most the ratio times `madeFrom`.
    func withinRatio(_ limits: ArchiveLimits) -> Bool {
        made <= limits.ratioGraceBytes || Double(made) <= Double(madeFrom) * limits.maxCompressionRatio
    }

    /// A ratio for a message, whole when it fits (a library caller's limit may be any Double).
    static func shown(_ ratio: Double) -> String {
        ratio.isFinite && abs(ratio) < 1e15 ? String(Int(ratio)) : String(ratio)
    }

    /// `made / madeFrom`, for messages.
    var ratio: Double { madeFrom > 0 ? Double(made) / Double(madeFrom) : .infinity }

    /// The limit problems of a delta's patches: one file over the per-entry limit, the archive's bytes and the
    /// made ones over the total, the ratio, and the content the delta delivers over `maxSize`.
    /// - Parameters:
    ///   - results: each patched file's path (below the package root) and size, as its integrity record says.
    ///   - archiveBytes: the bytes of every file entry of the archive.
    ///   - carriedBytes: the bytes of the files under Contents/ the delta carries whole (not the patches).
    func problems(
        results: [(path: String, size: Int64)], archiveBytes: Int64, carriedBytes: Int64, limits: ArchiveLimits, maxSize: Int64
    ) -> ProblemList {
        var problems = ProblemList()
        // hcpack delta keeps to the limits it is given: a delta made with the same flags passes them.
        let advice = "make the delta with the limits you install with (hcpack delta takes the same flags), or raise the limit for verify and install alike"
        for result in results where result.size > limits.maxEntryBytes {
            problems.add(
                .limitExceeded, path: result.path,
                "the patch makes a \(result.size)-byte file, over the limit of \(limits.maxEntryBytes) bytes for one entry (--max-bytes); \(advice)")
        }
        let total = archiveBytes.addingSaturated(made)
        if total > limits.maxTotalBytes {
            problems.add(
                .limitExceeded, path: "",
                "the archive's \(archiveBytes) bytes and the \(made) bytes its patches make come to \(total), over the limit of \(limits.maxTotalBytes) bytes (--max-bytes); \(advice)")
        }
        if !withinRatio(limits) {
            problems.add(
                .compressionRatio, path: Verifier.contentsPrefix + FilePatch.folder + "/",
                "the patches make \(made) bytes from \(madeFrom) bytes of patches and bases (ratio \(Self.shown(ratio)), over the limit of \(Self.shown(limits.maxCompressionRatio)), --max-ratio); \(advice)")
        }
        let delivered = carriedBytes.addingSaturated(made)
        if delivered > maxSize {
            problems.add(
                .tooLarge, path: "",
                "the content the delta carries, with the \(made) bytes its patches make, is \(delivered) bytes, over the \(maxSize)-byte limit; split the content into several products or raise --max-size")
        }
        return problems
    }
}
