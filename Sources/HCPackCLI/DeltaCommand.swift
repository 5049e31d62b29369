import HostedContent

/// `hcpack delta OLD NEW -o PATCH`: a package holding only what changed from OLD to NEW, installable on OLD.
struct DeltaCommand: Command {
    static let spec = CommandSpec(
        name: "delta",
        summary: "Make a delta package: NEW's files that changed since OLD, installable on top of OLD.",
        arguments: [
            ArgumentSpec("OLD", help: "The base version (archive or folder)."),
            ArgumentSpec("NEW", help: "The newer version of the same product (archive or folder)."),
        ],
        options: [
            OptionSpec("output", short: "o", value: "PATCH", required: true, help: "Where to write the delta archive."),
            OptionSpec("format", value: "zip|tar.gz", help: "Archive format (default: from PATCH's extension, else zip)."),
            BuildCommand.compressionOption, BuildCommand.sourceDateEpochOption,
            OptionSpec("no-patches", help: "Carry every changed file whole, never as a binary patch (for clients that cannot apply patches)."),
            OptionSpec("sign-key", value: "KEY", help: "Sign the delta (PATCH.hcsig) with this key, as hcpack sign."),
            SigningOptions.keyName, SigningOptions.expires, SigningOptions.signature,
            OptionSpec("force", help: "Replace an existing PATCH (and its signed note)."),
        ] + LimitOptions.options + [
            OptionSpec("json", help: "Print one JSON object on stdout."),
            OptionSpec("quiet", short: "q", help: "Print only errors."),
        ],
        discussion: """
            PATCH is a package: NEW's ContentInfo.plist with HCPackDeltaBase added (the base version and the SHA-256
            of OLD's and NEW's plists), and under Contents/ only the files that are new or whose SHA-256 changed; a
            changed file travels as a binary patch against OLD's copy when that is smaller (HCPackPatches), unless
            --no-patches is given. The limits (--max-bytes, --max-ratio, --max-size) apply to what the patches make
            as install applies them: a patch that would pass --max-ratio travels whole instead.
            'hcpack install PATCH --dest DIR' applies it only where DIR holds OLD, unchanged (docs/self-hosting.md).
            The same inputs always give the same bytes. NEW must record every file (hcpack build does).
            Exit status: 0 written, 1 OLD or NEW invalid, different products or NEW not newer, 2 usage error or
            PATCH exists, 3 I/O failure.
            """)

    let options: DeltaOptions
    let json: Bool
    let quiet: Bool
    let signing: SignRequest?

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        let name = Self.spec.name
        guard let output = arguments.value("output"), !output.isEmpty else {
            throw UsageError("missing -o PATCH (where to write the delta)", command: name)
        }
        var options = DeltaOptions(
            old: context.absolutePath(arguments.argument(0) ?? ""), new: context.absolutePath(arguments.argument(1) ?? ""),
            output: context.absolutePath(output))
        if let format = arguments.value("format") {
            guard let parsed = BuildFormat(rawValue: format), parsed != .directory else {
                throw UsageError("--format must be zip or tar.gz, got '\(format)'", command: name)
            }
            options.format = parsed
        }
        options.compression = try BuildCommand.compression(arguments, command: name) ?? options.compression
        options.sourceDateEpoch = try BuildCommand.sourceDateEpoch(arguments, context: context, command: name)
        options.force = arguments.flag("force")
        if arguments.flag("no-patches") { options.patchWindowLog = nil }
        try LimitOptions.apply(arguments, to: &options.verify, command: name)
        self.options = options
        signing = try SignRequest(
            arguments, context: context, options: SignOptions(force: options.force, verify: options.verify), keyOption: "sign-key",
            command: name)
        json = arguments.flag("json")
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let key = try signing?.loadKey(context)  // a bad key fails before any work
        let result = try DeltaBuilder.build(options)
        var signed: SignResult?
        if let signing, let key {
            switch try signing.sign(result.build.output, context: context, key: key) {
            case .signed(let outcome): signed = outcome
            case .rejected(let report):
                let problems = ReportRendering.problemLines(report.problems.problems)
                if json {
                    throw HCPackError(.invalidPackage, "wrote \(result.build.output), but did not sign it: " + problems, path: result.build.output)
                }
                context.out(problems)
                context.err("hcpack: error: wrote \(result.build.output), but did not sign it\n")
                return ExitCode.invalid
            }
        }
        let build = result.build
        if json {
            let object: JSONValue = .object([
                ("output", .string(build.output)),
                ("format", .string(build.format.rawValue)),
                ("productIdentifier", .string(build.productIdentifier)),
                ("version", .string(build.contentVersion)),
                ("baseVersion", .string(result.base.baseVersion)),
                ("basePlistSHA256", .string(result.base.basePlistSHA256)),
                ("files", .array(result.carried.map(JSONValue.string))),
                ("unchanged", .number(Int64(result.unchangedCount))),
                ("removed", .array(result.removed.map(JSONValue.string))),
                ("patched", .array(result.patched.map(Self.json))),
                ("contentBytes", .number(build.contentBytes)),
                ("archiveBytes", .number(build.outputBytes)),
                ("sha256", build.sha256.map(JSONValue.string) ?? .null),
                ("signature", signed.map(SignRequest.json) ?? .null),
            ])
            context.out(object.rendered() + "\n")
        } else if !quiet {
            context.out(ReportRendering.problemLines(build.problems.problems))
            context.out(
                "delta \(build.output): \(build.productIdentifier) \(result.base.baseVersion) -> \(build.contentVersion), "
                    + "\(ReportRendering.plural(result.carried.count, "file")) carried (\(build.contentBytes) bytes), "
                    + "\(result.unchangedCount) unchanged, \(result.removed.count) removed; \(build.outputBytes) archive bytes\n")
            for patch in result.patched {
                context.out("patched \(patch.path): \(Self.text(patch))\n")
            }
            if let digest = build.sha256 { context.out("sha256 \(digest)\n") }
            if let signed { context.out(SignRequest.text(signed)) }
        }
        return ExitCode.success
    }
}

extension DeltaCommand {
    /// One patched file in JSON: `{path, size, patchSize, saved, group}`; `group` is null for a patch of its own.
    static func json(_ patch: DeltaPatchSummary) -> JSONValue {
        .object([
            ("path", .string(patch.path)), ("size", .number(patch.size)), ("patchSize", .number(patch.patchSize)),
            ("saved", .number(patch.saved)), ("group", patch.group.map { .number(Int64($0)) } ?? .null),
        ])
    }

    /// What one patched file weighs, for text output.
    static func text(_ patch: DeltaPatchSummary) -> String {
        "\(patch.patchSize) bytes instead of \(patch.size) (saves \(patch.saved))"
            + (patch.group.map { ", in patch group \($0)" } ?? "")
    }
}

extension BuildCommand {
    static let compressionOption = OptionSpec(
        "compression", value: "auto|store|deflate", help: "Zip entry compression (default auto: store what does not shrink).")
    static let sourceDateEpochOption = OptionSpec(
        "source-date-epoch", value: "N", help: "Timestamp of every entry (default $SOURCE_DATE_EPOCH, else 315532800, 1980-01-01).")

    /// `--compression`, when given.
    static func compression(_ arguments: ParsedArguments, command: String) throws(UsageError) -> CompressionPolicy? {
        guard let compression = arguments.value("compression") else { return nil }
        guard let parsed = CompressionPolicy(rawValue: compression) else {
            throw UsageError("--compression must be auto, store or deflate, got '\(compression)'", command: command)
        }
        return parsed
    }

    /// `--source-date-epoch N`, else `$SOURCE_DATE_EPOCH`, else the zip epoch.
    static func sourceDateEpoch(_ arguments: ParsedArguments, context: Context, command: String) throws(UsageError) -> Int64 {
        if let epoch = try arguments.integer("source-date-epoch") {
            guard epoch >= 0 else { throw UsageError("--source-date-epoch must not be negative", command: command) }
            return epoch
        }
        if let text = context.environment["SOURCE_DATE_EPOCH"], !text.isEmpty {
            guard let epoch = Int64(text), epoch >= 0 else {
                throw UsageError("SOURCE_DATE_EPOCH must be a whole number of seconds, got '\(text)'", command: command)
            }
            return epoch
        }
        return BuildOptions.defaultSourceDateEpoch
    }
}
