import Foundation
import HostedContent

/// `hcpack sign ARCHIVE --key KEY`: check a package archive like verify, then write its signed note.
struct SignCommand: Command {
    static let spec = CommandSpec(
        name: "sign",
        summary: "Check a package archive and write its signed note (ARCHIVE.hcsig).",
        arguments: [ArgumentSpec("ARCHIVE", help: "A package archive (zip, tar, tar.gz/bz2/xz/zst).")],
        options: SignRequest.options + [
            OptionSpec("force", help: "Replace a note for a different text (another build, version or expiry)."),
        ] + LimitOptions.options + [
            OptionSpec("json", help: "Print one JSON object on stdout."),
            OptionSpec("quiet", short: "q", help: "Print nothing but errors."),
        ],
        discussion: """
            The package must pass verify and every listed file must have an HCPackIntegrity record (hcpack build
            writes them). A note for the same text gets this key's signature added (co-signing, to rotate keys);
            one for a different text is refused unless --force. The note is written atomically. docs/signing.md.
            Exit status: 0 signed, 1 invalid package, 2 usage error or a note for another text, 3 I/O failure or
            a key file others can read.
            """)

    let archive: String
    let request: SignRequest
    let json: Bool
    let quiet: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        archive = context.absolutePath(arguments.argument(0) ?? "")
        var options = SignOptions(force: arguments.flag("force"))
        try LimitOptions.apply(arguments, to: &options.verify, command: Self.spec.name)
        guard
            let request = try SignRequest(
                arguments, context: context, options: options, keyOption: "key", command: Self.spec.name)
        else { throw UsageError("missing --key KEY (a private key file, or env:VAR)", command: Self.spec.name) }
        self.request = request
        json = arguments.flag("json")
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        switch try request.sign(archive, context: context) {
        case .rejected(let report):
            if json {
                context.out(ReportRendering.json(report, strict: false).rendered() + "\n")
            } else {
                context.out(ReportRendering.problemLines(report.problems.problems))
            }
            context.err(
                "hcpack: error: \(archive) was not signed: \(ReportRendering.plural(report.problems.errorCount, "error")); nothing was written\n"
            )
            return ExitCode.invalid
        case .signed(let result):
            if json {
                context.out(SignRequest.json(result).rendered() + "\n")
            } else if !quiet {
                context.out(ReportRendering.problemLines(result.report.problems.problems))
                context.out(SignRequest.text(result))
            }
            return ExitCode.success
        }
    }
}

/// A signing asked for on the command line: the key (loaded when signing, never shown) and the options.
struct SignRequest {
    /// `--key-name`, `--expires`, `--signature` (the key option itself differs: `--key`, `--sign-key`).
    static let options: [OptionSpec] = [
        OptionSpec("key", value: "KEY", required: true, help: "The private key: a file (mode 0600), or env:VAR for the PEM in a variable."),
        SigningOptions.keyName, SigningOptions.expires, SigningOptions.signature,
    ]

    let keySource: String
    let keyName: String?
    var options: SignOptions

    /// The request of `--KEYOPTION KEY` and the shared options; nil when the key option is absent.
    init?(
        _ arguments: ParsedArguments, context: Context, options: SignOptions, keyOption: String, command: String
    ) throws(UsageError) {
        guard let source = arguments.value(keyOption) else {
            for other in ["key-name", "expires", "signature"] where arguments.value(other) != nil && keyOption != "key" {
                throw UsageError("--\(other) needs --\(keyOption) KEY", command: command)
            }
            return nil
        }
        keySource = source
        keyName = arguments.value("key-name")
        if let keyName, !VerifierKey.isValidName(keyName) {
            throw UsageError("--key-name '\(keyName)' is not a key name: no spaces or '+' (example.com/levels)", command: command)
        }
        var options = options
        options.expires = try SigningOptions.expiry(arguments, command: command)
        options.signaturePath = arguments.value("signature").map(context.absolutePath)
        self.options = options
    }

    /// Loads the key (so a bad key fails before any work).
    func loadKey(_ context: Context) throws(HCPackError) -> SigningKey {
        try SigningKey.load(keySource, name: keyName, environment: context.environment, relativeTo: context.currentDirectory)
    }

    func sign(_ archive: String, context: Context, key: SigningKey? = nil) throws(HCPackError) -> SignOutcome {
        let signer: SigningKey
        if let key { signer = key } else { signer = try loadKey(context) }
        return try PackageSigner.sign(archive, with: signer, options: options)
    }

    static func text(_ result: SignResult) -> String {
        let statement = result.statement
        let verb = result.alreadySigned ? "already signed" : result.addedToExisting ? "co-signed" : "signed"
        var text = "\(verb) \(statement.productIdentifier) \(statement.version) in \(result.signaturePath): "
        text += result.signers.map { "\($0.name) (\($0.keyHash))" }.joined(separator: ", ")
        text += statement.expires.map { "; expires \(PackageStatement.format($0))" } ?? "; never expires"
        return text + "\n"
    }

    static func json(_ result: SignResult) -> JSONValue {
        .object([
            ("signature", .string(result.signaturePath)),
            ("productIdentifier", .string(result.statement.productIdentifier)),
            ("version", .string(result.statement.version)),
            ("archiveSHA256", .string(result.statement.archiveSHA256)),
            ("archiveSize", .number(result.statement.archiveSize)),
            ("expires", result.statement.expires.map { .string(PackageStatement.format($0)) } ?? .null),
            ("signers", .array(result.signers.map { .object([("name", .string($0.name)), ("keyHash", .string($0.keyHash))]) })),
            ("addedToExisting", .bool(result.addedToExisting)),
            ("alreadySigned", .bool(result.alreadySigned)),
        ])
    }
}
