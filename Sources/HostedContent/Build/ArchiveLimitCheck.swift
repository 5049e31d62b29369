import ArchiveIO

/// Build's check against the limits verify and install read archives with (`ArchiveLimits`: entries, bytes
/// of one entry and of all, compression ratio past `ratioGraceBytes`), so that build refuses a package they
/// would refuse: entries and sizes from the plan, before anything is written; the ratio from the archive
/// written, before it takes the output's name.
///
/// The reader compares the bytes it has produced with the archive bytes it has consumed, while it reads. For a
/// zip that is measured here at the end of every entry's data, in the order the reader meets them (by local
/// header offset): consumed bytes are then at least the entry's end offset, so a reader that reads ahead only
/// lowers its ratio. A tar.gz is one stream, measured as a whole.
enum ArchiveLimitCheck {
    /// One entry as the reader meets it: its uncompressed size and the archive offset its data ends at.
    struct Entry {
        var size: Int64
        var end: Int64
    }

    /// The first entry-count or size limit the package `plan` would pass as an archive, or nil: checked
    /// before anything is written.
    static func problem(plan: BuildPlan, limits: ArchiveLimits) -> Problem? {
        guard plan.format != .directory else { return nil }
        let entries = [Entry(size: Int64(plan.plistBytes.count), end: 0)] + plan.items.map { Entry(size: $0.size, end: 0) }
        return problem(entries, limits: limits)
    }

    /// The compression ratio of the archive written at `path`, as the problem verify would report, or nil.
    static func ratioProblem(archive path: String, plan: BuildPlan, limits: ArchiveLimits) -> Problem? {
        var entries: [Entry] = []
        switch plan.format {
        case .directory:
            return nil
        case .tarGzip:
            guard let size = try? FileSystem.status(path)?.size else { return nil }
            let produced = plan.items.reduce(Int64(plan.plistBytes.count)) { $0 &+ $1.size }
            entries = [Entry(size: produced, end: size)]
        case .zip:
            var records: [(offset: UInt64, entry: Entry)] = []
            let zipLimits = ZipDirectoryLimits(maxEntries: max(limits.maxEntries, plan.items.count + 1))
            let read = try? ZipDirectory.read(path: path, limits: zipLimits) { facts in
                let dataOffset = facts.local?.dataOffset ?? facts.localHeaderOffset
                let end = Int64(clamping: dataOffset &+ facts.compressedSize)
                records.append((facts.localHeaderOffset, Entry(size: Int64(clamping: facts.uncompressedSize), end: end)))
            }
            // An unreadable zip is ZipStructureCheck's finding, made just before this.
            guard read != nil else { return nil }
            entries = records.sorted { $0.offset < $1.offset }.map(\.entry)
        }
        var unlimited = limits
        (unlimited.maxEntries, unlimited.maxEntryBytes, unlimited.maxTotalBytes) = (Int.max, Int64.max, Int64.max)
        return problem(entries, limits: unlimited)
    }

    /// The first limit `entries` pass; an `end` of 0 is not a point where the ratio is measured.
    static func problem(_ entries: [Entry], limits: ArchiveLimits) -> Problem? {
        let advice = "verify and install would refuse it; pass the same limit to build, verify and install"
        if entries.count > limits.maxEntries {
            return Problem(
                .limitExceeded, path: "",
                "\(entries.count) entries, over the limit of \(limits.maxEntries) (--max-entries): \(advice), or split the package")
        }
        var produced: Int64 = 0
        for entry in entries {
            if entry.size > limits.maxEntryBytes {
                return Problem(
                    .limitExceeded, path: "",
                    "an entry of \(entry.size) bytes, over the limit of \(limits.maxEntryBytes) bytes (--max-bytes): \(advice)")
            }
            produced = produced &+ entry.size
            if produced > limits.maxTotalBytes {
                return Problem(
                    .limitExceeded, path: "",
                    "more than \(limits.maxTotalBytes) bytes in all (--max-bytes): \(advice), or split the package")
            }
            guard entry.end > 0, produced > limits.ratioGraceBytes else { continue }
            let ratio = Double(produced) / Double(entry.end)
            if ratio > limits.maxCompressionRatio {
                return Problem(
                    .compressionRatio, path: "",
                    "\(produced) bytes expand from \(entry.end) archive bytes (ratio \(Int(ratio)), over the limit of "
                        + "\(Int(limits.maxCompressionRatio)), --max-ratio): \(advice), or store the data (--compression store)")
            }
        }
        return nil
    }

    /// The build's error for `problem`: exit 1, with the rule ID as verify prints it.
    static func refusal(_ problem: Problem, output: String) -> HCPackError {
        HCPackError(.invalidPackage, "\(output): [\(problem.rule.rawValue)] \(problem.message); nothing was written", path: output)
    }
}
