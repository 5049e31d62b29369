import HostedContent

/// `hcpack build SOURCE`: validate a package (or a folder of content) and write a reproducible archive.
struct BuildCommand: Command {
    static let spec = CommandSpec(
        name: "build",
        summary: "Validate a package folder (or a folder of content) and pack it reproducibly.",
        arguments: [
            ArgumentSpec(
                "SOURCE",
                help: "A package folder (ContentInfo.plist and Contents/), or a plain folder whose files become Contents/.")
        ],
        options: [
            OptionSpec("output", short: "o", value: "OUTPUT", help: "Where to write (default: <product-id>-<version>.zip here)."),
            OptionSpec(
                "product-id", value: "ID", help: "IAPProductIdentifier (required for a plain folder; overrides the plist)."),
            OptionSpec("content-version", value: "V", help: "ContentVersion (required for a plain folder; overrides the plist)."),
            OptionSpec(
                "format", value: "zip|tar.gz|dir",
                help: "Output format (default: from OUTPUT's extension, .zip, .tar.gz or .tgz; zip without -o)."),
            compressionOption,
            OptionSpec(
                "exclude", value: "GLOB", repeatable: true,
                help: "Leave out paths under Contents/ matching GLOB (path or any name); repeatable."),
            sourceDateEpochOption,
            OptionSpec("sign-key", value: "KEY", help: "Sign the archive built (ARCHIVE.hcsig) with this key, as hcpack sign."),
            SigningOptions.keyName, SigningOptions.expires, SigningOptions.signature,
            OptionSpec("force", help: "Replace an existing OUTPUT (and its signed note)."),
        ] + LimitOptions.options + [
            OptionSpec("json", help: "Print one JSON object on stdout."),
            OptionSpec("quiet", short: "q", help: "Print only errors."),
        ],
        discussion: """
            Junk (.DS_Store, __MACOSX/, ._*, Thumbs.db, .git/) is always left out. The package is checked with the
            rules of 'hcpack verify' before anything is written; with an error, nothing is written. Files is
            generated when the plist has none, and each listed file's size and SHA-256 is recorded under
            HCPackIntegrity. The same input always gives the same bytes (docs/format.md).
            Exit status: 0 built, 1 invalid package, 2 usage error or OUTPUT exists, 3 I/O failure.
            """)

    let options: BuildOptions
    let json: Bool
    let quiet: Bool
    let signing: SignRequest?

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        let name = Self.spec.name
        var options = BuildOptions(
            source: context.absolutePath(arguments.argument(0) ?? ""), defaultOutputFolder: context.currentDirectory)
        options.output = arguments.value("output").map(context.absolutePath)
        options.productIdentifier = arguments.value("product-id")
        options.contentVersion = arguments.value("content-version")
        if let format = arguments.value("format") {
            guard let parsed = BuildFormat(rawValue: format) else {
                throw UsageError("--format must be zip, tar.gz or dir, got '\(format)'", command: name)
            }
            options.format = parsed
        }
        options.compression = try Self.compression(arguments, command: name) ?? options.compression
        options.excludes = arguments.values("exclude")
        options.sourceDateEpoch = try Self.sourceDateEpoch(arguments, context: context, command: name)
        options.force = arguments.flag("force")
        try LimitOptions.apply(arguments, to: &options.verify, command: name)
        self.options = options
        signing = try SignRequest(
            arguments, context: context, options: SignOptions(force: options.force, verify: options.verify), keyOption: "sign-key",
            command: name)
        if signing != nil && options.format == .directory {
            throw UsageError("--sign-key signs archives; --format dir builds a folder", command: name)
        }
        json = arguments.flag("json")
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let key = try signing?.loadKey(context)  // a bad key fails before any work
        let bar = ProgressBar(context: context, enabled: !json && !quiet)
        var plan: BuildPlan
        do {
            plan = try Builder.prepare(options, progress: bar.handler, deferringDigests: true)
        } catch {
            bar.finish()
            throw error
        }
        bar.finish()
        guard plan.isValid else {
            if json {
                context.out(jsonReport(plan: plan, result: nil).appending("signature", .null).rendered() + "\n")
            } else {
                let problems =
                    quiet ? plan.report.problems.problems.filter { $0.severity == .error } : plan.report.problems.problems
                context.out(ReportRendering.problemLines(problems))
                if !quiet { context.out(notes(plan.excluded)) }
            }
            context.err(
                "hcpack: error: \(options.source): \(ReportRendering.plural(plan.report.problems.errorCount, "error")); nothing was written\n"
            )
            return ExitCode.invalid
        }
        plan.releaseCheckedContents()
        let result: BuildResult
        do {
            result = try Builder.write(plan, options: options, progress: bar.handler)
        } catch {
            bar.finish()
            throw error
        }
        bar.finish()
        var signed: SignResult?
        if let signing, let key, result.format != .directory {
            switch try signing.sign(result.output, context: context, key: key) {
            case .signed(let outcome): signed = outcome
            case .rejected(let report):
                let problems = ReportRendering.problemLines(report.problems.problems)
                if json {
                    throw HCPackError(.invalidPackage, "built \(result.output), but did not sign it: " + problems, path: result.output)
                }
                context.out(problems)
                context.err("hcpack: error: built \(result.output), but did not sign it\n")
                return ExitCode.invalid
            }
        }
        if json {
            let signature = signed.map(SignRequest.json) ?? .null
            context.out(jsonReport(plan: plan, result: result).appending("signature", signature).rendered() + "\n")
        } else if !quiet {
            context.out(notes(result.excluded))
            context.out(ReportRendering.problemLines(result.problems.problems))
            context.out(
                "built \(result.output) (\(result.format.rawValue)): \(ReportRendering.plural(result.fileCount, "file")), "
                    + "\(result.contentBytes) content bytes, \(result.outputBytes) \(result.format == .directory ? "bytes in all" : "archive bytes")\n"
            )
            if let digest = result.sha256 { context.out("sha256 \(digest)\n") }
            if let signed { context.out(SignRequest.text(signed)) }
        }
        return ExitCode.success
    }

    /// One note line per entry left out.
    func notes(_ excluded: [ExcludedEntry]) -> String {
        excluded.map { "note: left out \($0.path) (\($0.reason.explanation))\n" }.joined()
    }

    func jsonReport(plan: BuildPlan, result: BuildResult?) -> JSONValue {
        let info = plan.contentInfo
        func optional(_ text: String?) -> JSONValue { text.map(JSONValue.string) ?? .null }
        return .object([
            ("built", .bool(result != nil)),
            ("output", result.map { .string($0.output) } ?? .null),
            ("format", .string(plan.format.rawValue)),
            ("productIdentifier", optional(info?.productIdentifier)),
            ("contentVersion", optional(info?.contentVersion)),
            ("files", .number(Int64(plan.fileCount))),
            ("contentBytes", .number(plan.contentBytes)),
            ("archiveBytes", result.map { .number($0.outputBytes) } ?? .null),
            ("sha256", optional(result?.sha256)),
            ("excluded", .array(plan.excluded.map { .string($0.path) })),
            ("errors", .number(Int64(plan.report.problems.errorCount))),
            ("warnings", .number(Int64(plan.report.problems.warningCount))),
            ("problems", ReportRendering.problems(plan.report.problems)),
        ])
    }
}
