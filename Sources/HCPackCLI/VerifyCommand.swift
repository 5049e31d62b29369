import HostedContent

/// `hcpack verify PATH`: every problem of a package folder or archive, at once.
struct VerifyCommand: Command {
    static let spec = CommandSpec(
        name: "verify",
        summary: "Check a package folder or archive and report every problem.",
        arguments: [ArgumentSpec("PATH", help: "A package folder, or an archive (zip, tar, tar.gz/bz2/xz/zst).")],
        options: [
            OptionSpec("strict", help: "Fail on warnings too."),
            VerifyOptions.maxSizeOption,
            OptionSpec("budget", value: "FILE", help: "JSON size budget: maxTotalBytes, maxFileBytes, maxFiles (docs/budgets.md)."),
            OptionSpec("json", help: "Print one JSON object on stdout."),
            OptionSpec("quiet", short: "q", help: "Print nothing; only the exit code tells."),
        ],
        discussion: """
            Exit status: 0 valid, 1 invalid (errors; with --strict, warnings too), 2 usage error, 3 unreadable input.
            Rules are listed in docs/rules.md.
            """)

    let path: String
    let strict: Bool
    let json: Bool
    let quiet: Bool
    let options: VerifyOptions
    let budgetPath: String?

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        path = context.absolutePath(arguments.argument(0) ?? "")
        strict = arguments.flag("strict")
        json = arguments.flag("json")
        quiet = arguments.flag("quiet")
        var options = VerifyOptions()
        try options.applyMaxSize(arguments, command: Self.spec.name)
        self.options = options
        budgetPath = arguments.value("budget").map(context.absolutePath)
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        var options = options
        if let budgetPath { options.budget = try SizeBudget.load(budgetPath) }
        let report = try Verifier.verify(path, options: options)
        let valid = report.isValid(strict: strict)
        if json {
            context.out(ReportRendering.json(report, strict: strict).rendered() + "\n")
        } else if !quiet {
            context.out(ReportRendering.text(report, label: path, strict: strict))
        }
        return valid ? ExitCode.success : ExitCode.invalid
    }
}

extension VerifyOptions {
    /// `--max-size BYTES`, shared by verify, build and install: the largest total content size.
    static let maxSizeOption = OptionSpec(
        "max-size", value: "BYTES", help: "Largest total content size (default 2000000000).")

    /// Sets `maxSize` from `--max-size` when it is given.
    mutating func applyMaxSize(_ arguments: ParsedArguments, command: String) throws(UsageError) {
        guard let maxSize = try arguments.integer("max-size") else { return }
        guard maxSize > 0 else { throw UsageError("--max-size must be positive", command: command) }
        self.maxSize = maxSize
    }
}
