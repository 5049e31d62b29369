import HostedContent

/// The limits every command that checks a package takes (build, verify, install, sign, delta, catalog, fetch), declared once
/// so that a pipeline can allow at verify and install what it allowed at build (docs/SECURITY.md).
enum LimitOptions {
    static let options: [OptionSpec] = [
        OptionSpec(
            "max-size", value: "BYTES",
            help: "Largest content size: the files under Contents/, ContentInfo.plist aside (default 2000000000)."),
        OptionSpec("max-bytes", value: "N", help: "Most uncompressed bytes read from an archive (default 17179869184)."),
        OptionSpec("max-entries", value: "N", help: "Most entries in an archive (default 1000000)."),
        OptionSpec("max-ratio", value: "R", help: "Largest compression ratio, past the first 16 MiB (default 200)."),
    ]

    /// Sets the limits given on the command line in `options`.
    static func apply(_ arguments: ParsedArguments, to options: inout VerifyOptions, command: String) throws(UsageError) {
        if let maxSize = try arguments.integer("max-size") {
            guard maxSize > 0 else { throw UsageError("--max-size must be positive", command: command) }
            options.maxSize = maxSize
        }
        var limits = options.limits.archive
        if let maxBytes = try arguments.integer("max-bytes") {
            guard maxBytes > 0 else { throw UsageError("--max-bytes must be positive", command: command) }
            limits.maxTotalBytes = maxBytes
            limits.maxEntryBytes = min(limits.maxEntryBytes, maxBytes)
        }
        if let maxEntries = try arguments.integer("max-entries") {
            guard maxEntries > 0, maxEntries <= Int64(Int.max) else {
                throw UsageError("--max-entries must be positive", command: command)
            }
            limits.maxEntries = Int(maxEntries)
        }
        if let text = arguments.value("max-ratio") {
            guard let ratio = Double(text), ratio.isFinite, ratio >= 1 else {
                throw UsageError("--max-ratio needs a number of at least 1, got '\(text)'", command: command)
            }
            limits.maxCompressionRatio = ratio
        }
        options.limits.archive = limits
    }
}
