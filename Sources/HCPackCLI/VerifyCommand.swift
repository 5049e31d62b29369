import HostedContent

/// `hcpack verify PATH`: every problem of a package folder or archive, at once.
struct VerifyCommand: Command {
    static let spec = CommandSpec(
        name: "verify",
        summary: "Check a package folder or archive and report every problem.",
        arguments: [ArgumentSpec("PATH", help: "A package folder, or an archive (zip, tar, tar.gz/bz2/xz/zst).")],
        options: [
            OptionSpec("strict", help: "Fail on warnings too."),
            OptionSpec("budget", value: "FILE", help: "JSON size budget: maxTotalBytes, maxFileBytes, maxFiles (docs/budgets.md)."),
            SigningOptions.trustedKey, SigningOptions.signature,
        ] + LimitOptions.options + [
            OptionSpec("json", help: "Print one JSON object on stdout."),
            OptionSpec("quiet", short: "q", help: "Print nothing; only the exit code tells."),
        ],
        discussion: """
            Exit status: 0 valid, 1 invalid (errors; with --strict, warnings too), 2 usage error, 3 unreadable input.
            Rules are listed in docs/rules.md. An archive's signed note (ARCHIVE.hcsig) is reported; with
            --trusted-key it is required (docs/signing.md).
            """)

    let path: String
    let strict: Bool
    let json: Bool
    let quiet: Bool
    let options: VerifyOptions
    let budgetPath: String?
    let signature: SignaturePolicy?
    let signaturePath: String?

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        path = context.absolutePath(arguments.argument(0) ?? "")
        strict = arguments.flag("strict")
        json = arguments.flag("json")
        quiet = arguments.flag("quiet")
        var options = VerifyOptions()
        try LimitOptions.apply(arguments, to: &options, command: Self.spec.name)
        self.options = options
        budgetPath = arguments.value("budget").map(context.absolutePath)
        signature = try SigningOptions.policy(arguments, context: context, command: Self.spec.name)
        signaturePath = arguments.value("signature").map(context.absolutePath)
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        var options = options
        if let budgetPath { options.budget = try SizeBudget.load(budgetPath) }
        let (report, summary) = try verifyWithSignature(options)
        let valid = report.isValid(strict: strict)
        let delta = report.deltaBase
        if json {
            let object = ReportRendering.json(report, strict: strict).appending("signature", SigningOptions.json(summary))
                .appending("delta", delta.map { Self.json($0, report) } ?? .null)
            context.out(object.rendered() + "\n")
        } else if !quiet {
            let deltaLine = delta.map { Self.text($0, report) } ?? ""
            context.out(SigningOptions.text(summary) + deltaLine + ReportRendering.text(report, label: path, strict: strict))
        }
        return valid ? ExitCode.success : ExitCode.invalid
    }
}

extension VerifyCommand {
    /// `delta` in verify's JSON: the base it applies to, and the files it carries.
    static func json(_ delta: DeltaBase, _ report: VerificationReport) -> JSONValue {
        .object([
            ("baseVersion", .string(delta.baseVersion)),
            ("basePlistSHA256", .string(delta.basePlistSHA256)),
            ("files", .number(Int64(report.contentFileCount))),
            ("bytes", .number(report.contentBytes)),
        ])
    }

    /// One line about a delta, for verify's text report.
    /// Patch entries are not listed files: they are counted apart (review: "carries 2 files of 13 listed" for a
    /// delta carrying none whole and five as patches in two entries).
    static func text(_ delta: DeltaBase, _ report: VerificationReport) -> String {
        let patched = report.contentInfo.map { FilePatch.patchedPaths(of: $0).count } ?? 0
        let patchEntries = report.snapshot.entries.count { $0.kind == .file && FilePatch.isPatchEntry($0.path) }
        let whole = max(0, report.contentFileCount - patchEntries)
        return "delta: applies to version \(delta.baseVersion) (plist SHA-256 \(delta.basePlistSHA256)); carries "
            + "\(whole) of \(report.listedFileCount) listed files whole"
            + (patched > 0 ? " and \(patched) as patches (\(patchEntries) patch \(patchEntries == 1 ? "entry" : "entries"))" : "")
            + ", \(report.contentBytes) bytes\n"
    }

    /// The report, and for an archive what its signed note says (required with --trusted-key).
    func verifyWithSignature(_ options: VerifyOptions) throws(HCPackError) -> (VerificationReport, SignatureSummary?) {
        let isFolder = try FileSystem.status(path)?.kind == .directory
        if isFolder && (signature != nil || signaturePath != nil) {
            throw HCPackError(
                .invalidRequest, "\(path) is a folder; signatures are of archives, build one first (hcpack build)", path: path)
        }
        if let signature {
            let (report, summary) = try Verifier.verify(path, options: options, signature: signature)
            return (report, summary)
        }
        let report = try Verifier.verify(path, options: options)
        return (report, isFolder ? nil : try SignatureChecker.describe(path, signaturePath: signaturePath))
    }
}
