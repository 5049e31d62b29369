import Foundation
import HostedContent

/// `hcpack sign-file FILE --key KEY`: a detached signed note over a file that is not a package (a release
/// tarball), written to FILE.hcsig.
struct SignFileCommand: Command {
    static let spec = CommandSpec(
        name: "sign-file",
        summary: "Sign any file (a release tarball): write FILE.hcsig naming its name, size and SHA-256.",
        arguments: [ArgumentSpec("FILE", help: "The file to sign; it is read, never changed.")],
        options: [
            OptionSpec("key", value: "KEY", help: "The private key: a file (mode 0600), or env:VAR for the PEM in a variable."),
            SigningOptions.keyName,
            OptionSpec("force", help: "Replace an existing FILE.hcsig."),
            OptionSpec("quiet", short: "q", help: "Print nothing but errors."),
        ],
        discussion: """
            For files that are not packages (hcpack sign checks and signs those). The note's text is
            'hcpack file v1' and the file's name, size and SHA-256 (docs/signing.md); check it with
            hcpack verify-file or Go's golang.org/x/mod/sumdb/note. The note is written atomically.
            Exit status: 0 signed, 2 usage error or a note already there, 3 I/O failure or a key file others can read.
            """)

    let path: String
    let key: String
    let keyName: String?
    let force: Bool
    let quiet: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        path = context.absolutePath(arguments.argument(0) ?? "")
        guard let key = arguments.value("key") else {
            throw UsageError("missing --key KEY (a private key file, or env:VAR)", command: Self.spec.name)
        }
        self.key = key
        keyName = arguments.value("key-name")
        force = arguments.flag("force")
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let signer = try SigningKey.load(key, name: keyName, environment: context.environment, relativeTo: context.currentDirectory)
        let statement = try FileSignature.sign(path, with: signer, force: force)
        if !quiet {
            context.out(
                "signed \(statement.name) (\(statement.size) bytes, SHA-256 \(statement.sha256)) in \(FileSignature.notePath(for: path)): \(signer.name) (\(try signer.verifierKey.hashText))\n"
            )
        }
        return ExitCode.success
    }
}

/// `hcpack verify-file FILE --trusted-key PUB`: FILE is the file FILE.hcsig signs, signed by a trusted key.
struct VerifyFileCommand: Command {
    static let spec = CommandSpec(
        name: "verify-file",
        summary: "Check a file against FILE.hcsig (sign-file): signed by a trusted key, same name, size and SHA-256.",
        arguments: [ArgumentSpec("FILE", help: "The downloaded file; its note is FILE.hcsig.")],
        options: [
            SigningOptions.trustedKey,
            OptionSpec("quiet", short: "q", help: "Print nothing; only the exit code tells."),
        ],
        discussion: """
            Exit status: 0 only when a trusted key's signature verifies and the file has the signed name, size
            and SHA-256; 1 otherwise (each problem with its signature.* rule); 2 usage error; 3 unreadable file.
            """)

    let path: String
    let trusted: [VerifierKey]
    let quiet: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        path = context.absolutePath(arguments.argument(0) ?? "")
        trusted = try SigningOptions.trustedKeys(arguments, context: context, command: Self.spec.name)
        guard !trusted.isEmpty else {
            throw UsageError("missing --trusted-key PUB (the keys the file must be signed by)", command: Self.spec.name)
        }
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let result = try FileSignature.check(path, trusted: trusted)
        let valid = !result.problems.hasErrors
        if !quiet {
            context.out(ReportRendering.problemLines(result.problems.problems))
            if valid {
                let signers = result.trustedSigners.map { "\($0.name) (\($0.keyHash))" }.joined(separator: ", ")
                context.out("\(path): signed by \(signers)\n")
            } else {
                context.out("\(path): NOT the signed file; do not use it\n")
            }
        }
        return valid ? ExitCode.success : ExitCode.invalid
    }
}
