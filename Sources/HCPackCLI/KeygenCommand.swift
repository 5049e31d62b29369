import HostedContent

/// `hcpack keygen --name NAME -o FILE`: a new Ed25519 signing key and its verifier key.
struct KeygenCommand: Command {
    static let spec = CommandSpec(
        name: "keygen",
        summary: "Make an Ed25519 signing key (FILE, mode 0600) and its verifier key (FILE.pub).",
        options: [
            OptionSpec("name", value: "NAME", required: true, help: "The key's name: host-like, no spaces or '+' (example.com/levels)."),
            OptionSpec("output", short: "o", value: "FILE", required: true, help: "The private key file to create (never replaced)."),
        ],
        discussion: """
            FILE holds the private key as PKCS#8 PEM (what 'openssl genpkey -algorithm ed25519' writes), after a
            line recording its name; keep it secret (a CI secret: 'hcpack sign --key env:VAR'). FILE.pub holds the
            verifier key line that 'verify' and 'install' take with --trusted-key. docs/signing.md has the details.
            Exit status: 0 made, 2 usage error or FILE exists, 3 I/O failure.
            """)

    let name: String
    let output: String

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        guard let name = arguments.value("name") else {
            throw UsageError("missing --name NAME (the key's name, such as example.com/levels)", command: Self.spec.name)
        }
        guard VerifierKey.isValidName(name) else {
            throw UsageError("--name '\(name)' is not a key name: no spaces or '+' (example.com/levels)", command: Self.spec.name)
        }
        guard let output = arguments.value("output"), !output.isEmpty else {
            throw UsageError("missing -o FILE (where to write the private key)", command: Self.spec.name)
        }
        self.name = name
        self.output = context.absolutePath(output)
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let key = try SigningKey.generate(name: name)
        try key.write(to: output)
        context.err("wrote the private key to \(output) (mode 0600; keep it secret) and the verifier key to \(output).pub\n")
        context.out(try key.verifierKey.line + "\n")
        return ExitCode.success
    }
}

/// `hcpack pubkey FILE`: the verifier key line of a private key.
struct PubkeyCommand: Command {
    static let spec = CommandSpec(
        name: "pubkey",
        summary: "Print the verifier key line of a private key (hcpack keygen's or openssl genpkey's).",
        arguments: [ArgumentSpec("KEY", help: "A private key file, or env:VAR for the PEM in an environment variable.")],
        options: [OptionSpec("name", value: "NAME", help: "The key's name (required for a key not made by hcpack keygen).")],
        discussion: """
            Prints NAME+HASH+KEY, the line --trusted-key takes. Never prints the private key.
            Exit status: 0 printed, 2 usage error or not a usable key, 3 unreadable file or a key file others can read.
            """)

    let source: String
    let name: String?

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        source = arguments.argument(0) ?? ""
        name = arguments.value("name")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let key = try SigningKey.load(source, name: name, environment: context.environment, relativeTo: context.currentDirectory)
        context.out(try key.verifierKey.line + "\n")
        return ExitCode.success
    }
}
