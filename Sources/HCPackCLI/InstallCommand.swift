import HostedContent

/// `hcpack install ARCHIVE --dest DIR`: verify a package archive and place its listed files in DIR.
struct InstallCommand: Command {
    static let spec = CommandSpec(
        name: "install",
        summary: "Verify a package archive and install its listed files into a folder.",
        arguments: [ArgumentSpec("ARCHIVE", help: "A package archive (zip, tar, tar.gz/bz2/xz/zst).")],
        options: [
            OptionSpec("dest", value: "DIR", required: true, help: "The folder to install into (must exist)."),
            OptionSpec("all", help: "Install every regular file under Contents/, listed in Files or not."),
            OptionSpec("expect-product-id", value: "ID", help: "Refuse a package with another IAPProductIdentifier."),
            OptionSpec("expect-version", value: "V", help: "Refuse a package with another ContentVersion."),
            OptionSpec("force", help: "Allow a downgrade; overwrite files in DIR that hcpack did not install."),
            OptionSpec("wait", help: "Wait for another install into DIR to finish instead of failing."),
            SigningOptions.trustedKey, SigningOptions.signature,
        ] + LimitOptions.options + [
            OptionSpec("json", help: "Print one JSON object on stdout."),
            OptionSpec("quiet", short: "q", help: "Print nothing but errors."),
        ],
        discussion: """
            Exit status: 0 installed (or already installed), 1 invalid or refused package (DIR untouched),
            2 usage error, 3 I/O or environment failure (missing DIR, disk full, another install running).
            The procedure, receipts and guarantees are described in docs/install.md. With --trusted-key, only a
            package signed by one of the keys is installed, never below the installed version (docs/signing.md).
            """)

    let archive: String
    let options: InstallOptions
    let json: Bool
    let quiet: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        let name = Self.spec.name
        archive = context.absolutePath(arguments.argument(0) ?? "")
        guard let dest = arguments.value("dest"), !dest.isEmpty else {
            throw UsageError("missing --dest DIR (the folder to install into)", command: name)
        }
        var options = InstallOptions(destination: context.absolutePath(dest))
        options.installAll = arguments.flag("all")
        options.force = arguments.flag("force")
        options.wait = arguments.flag("wait")
        options.expectedProductIdentifier = arguments.value("expect-product-id")
        if let version = arguments.value("expect-version") {
            guard ContentVersion(version) != nil else {
                throw UsageError(
                    "--expect-version '\(version)' is not a version (integers separated by periods, such as 1.2)", command: name)
            }
            options.expectedVersion = version
        }
        options.signature = try SigningOptions.policy(arguments, context: context, command: name)
        try LimitOptions.apply(arguments, to: &options.verify, command: name)
        self.options = options
        json = arguments.flag("json")
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let bar = ProgressBar(context: context, enabled: !json && !quiet)
        let outcome: InstallOutcome
        do {
            outcome = try Installer.install(archive, options: options, progress: bar.handler)
        } catch {
            bar.finish()
            throw error
        }
        bar.finish()
        switch outcome {
        case .rejected(let report):
            if json {
                context.out(ReportRendering.json(report, strict: false).rendered() + "\n")
            } else if !quiet {
                context.out(ReportRendering.text(report, label: archive, strict: false))
                context.err("hcpack: error: \(archive) is not installable; nothing was written to \(options.destination)\n")
            }
            return ExitCode.invalid
        case .completed(let result):
            if let leftover = result.leftover {
                context.err(
                    "hcpack: warning: installed, but the staging folder was not removed (\(leftover)); the next install into \(options.destination) removes it\n"
                )
            }
            if json {
                context.out(Self.json(result).rendered() + "\n")
            } else if !quiet {
                // Warnings (a package without Files, say) go to stderr, the summary to stdout.
                context.err(Self.warnings(result))
                context.out(Self.text(result, destination: options.destination))
            }
            return ExitCode.success
        }
    }

    /// The package's warnings, one line each, for stderr.
    static func warnings(_ result: InstallResult) -> String {
        result.report.problems.problems.map { problem in
            let location = problem.path.isEmpty ? "" : problem.path + ": "
            return "\(problem.severity.rawValue): [\(problem.rule.rawValue)] \(location)\(problem.message)\n"
        }.joined()
    }

    static func text(_ result: InstallResult, destination: String) -> String {
        var text = ""
        if result.selection == .contents {
            text += "every file under Contents/ was selected, not a Files list\n"
        }
        for path in result.kept {
            text +=
                "kept \(destination)/\(path): the previous version installed it, but it changed since; remove it yourself if unneeded\n"
        }
        let identity = "\(result.productIdentifier) \(result.version)"
        switch result.status {
        case .unchanged:
            text += "\(identity) is already installed in \(destination); nothing to do\n"
        case .installed, .upgraded, .downgraded:
            let from = result.previousVersion.map { " (was \($0))" } ?? ""
            text += "\(result.status.rawValue) \(identity)\(from) in \(destination): "
            text += "\(ReportRendering.plural(result.installed.count, "file")) placed (\(result.bytes) bytes), "
            text += "\(result.skipped.count) already in place, \(result.removed.count) removed\n"
        }
        return text
    }

    static func json(_ result: InstallResult) -> JSONValue {
        .object([
            ("status", .string(result.status.rawValue)),
            ("productIdentifier", .string(result.productIdentifier)),
            ("version", .string(result.version)),
            ("previousVersion", result.previousVersion.map(JSONValue.string) ?? .null),
            ("selection", .string(result.selection.rawValue)),
            ("installed", .array(result.installed.map(JSONValue.string))),
            ("skipped", .array(result.skipped.map(JSONValue.string))),
            ("removed", .array(result.removed.map(JSONValue.string))),
            ("kept", .array(result.kept.map(JSONValue.string))),
            ("bytes", .number(result.bytes)),
            ("problems", ReportRendering.problems(result.report.problems)),
        ])
    }
}
