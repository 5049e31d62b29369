import Foundation
import HostedContent

/// `hcpack catalog ARCHIVE... --base-url URL -o catalog.json --serial N`: the signed index an app fetches.
struct CatalogCommand: Command {
    static let spec = CommandSpec(
        name: "catalog",
        summary: "Write the catalog an app fetches: each product's newest archive and its deltas, signed.",
        arguments: [ArgumentSpec("ARCHIVE", repeatable: true, help: "Full package archives and deltas, of one product or several.")],
        options: [
            OptionSpec("base-url", value: "URL", required: true, help: "Where the archives are published; each URL is URL/<file name>."),
            OptionSpec("output", short: "o", value: "FILE", required: true, help: "Where to write the catalog; the note goes to FILE.hcsig."),
            OptionSpec("serial", value: "N", required: true, help: "The catalog's serial, higher than any published before."),
            SigningOptions.expires,
            OptionSpec(
                "policy", value: "ID=POLICY", repeatable: true,
                help: "When apps install product ID: essential, prefetch or onDemand (the default); repeatable."),
            OptionSpec("sign-key", value: "KEY", help: "Sign the catalog (FILE.hcsig) with this key: a file (mode 0600) or env:VAR."),
            SigningOptions.keyName,
            OptionSpec("json", help: "Print one JSON object on stdout."),
            OptionSpec("quiet", short: "q", help: "Print only errors."),
        ] + LimitOptions.options,
        discussion: """
            One entry per product: its highest full archive, with the deltas whose new version is that one. Every
            archive is verified first; the output is deterministic and written atomically (the note before the
            catalog). Upload the archives and deltas first, the catalog last (docs/self-hosting.md).
            Exit status: 0 written, 1 an invalid archive or a delta to another build, 2 usage error, 3 I/O failure.
            """)

    let options: CatalogOptions
    let keySource: String?
    let keyName: String?
    let json: Bool
    let quiet: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        let name = Self.spec.name
        let archives = arguments.arguments(from: 0).map(context.absolutePath)
        guard let baseURL = arguments.value("base-url"), !baseURL.isEmpty else {
            throw UsageError("missing --base-url URL (where the archives are published)", command: name)
        }
        guard let output = arguments.value("output"), !output.isEmpty else {
            throw UsageError("missing -o FILE (where to write the catalog)", command: name)
        }
        guard let serial = try arguments.integer("serial") else {
            throw UsageError("missing --serial N (higher than the last catalog's)", command: name)
        }
        guard serial >= 0 else { throw UsageError("--serial must not be negative", command: name) }
        var options = CatalogOptions(
            archives: archives, baseURL: baseURL, output: context.absolutePath(output), serial: serial,
            expires: try SigningOptions.expiry(arguments, command: name))
        for value in arguments.values("policy") {
            let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let policy = DownloadPolicy(rawValue: parts[1]), options.policies[parts[0]] == nil else {
                throw UsageError(
                    "--policy '\(value)' is not ID=essential, ID=prefetch or ID=onDemand, once per product", command: name)
            }
            options.policies[parts[0]] = policy
        }
        try LimitOptions.apply(arguments, to: &options.verify, command: name)
        self.options = options
        keySource = arguments.value("sign-key")
        keyName = arguments.value("key-name")
        if keySource == nil && keyName != nil { throw UsageError("--key-name needs --sign-key KEY", command: name) }
        json = arguments.flag("json")
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let key = try keySource.map { source throws(HCPackError) in
            try SigningKey.load(source, name: keyName, environment: context.environment, relativeTo: context.currentDirectory)
        }
        let result = try CatalogBuilder.write(options, key: key)
        if json {
            context.out(
                JSONValue.object([
                    ("output", .string(result.output)),
                    ("sha256", .string(result.sha256)),
                    ("serial", .number(result.catalog.serial)),
                    ("expires", result.catalog.expires.map { .string(PackageStatement.format($0)) } ?? .null),
                    ("products", .array(result.catalog.packages.map { .string($0.productIdentifier) })),
                    ("signature", result.signaturePath.map(JSONValue.string) ?? .null),
                    ("skipped", .array(result.skipped.map(JSONValue.string))),
                ]).rendered() + "\n")
        } else if !quiet {
            for path in result.skipped { context.out("note: left out \(path) (not the newest version, nor a delta to it)\n") }
            for package in result.catalog.packages {
                let deltas = package.deltas.map(\.baseVersion).joined(separator: ", ")
                context.out("\(package.productIdentifier) \(package.version): \(package.url)\(deltas.isEmpty ? "" : "; deltas from \(deltas)")\n")
            }
            var line = "wrote \(result.output) (serial \(result.catalog.serial))"
            if let path = result.signaturePath, let signer = result.signer { line += ", signed by \(signer.name) (\(signer.keyHash)) in \(path)" }
            context.out(line + "\n")
        }
        return ExitCode.success
    }
}

/// `hcpack verify-catalog catalog.json --trusted-key PUB [--min-serial N]`: what an app checks before trusting one.
struct VerifyCatalogCommand: Command {
    static let spec = CommandSpec(
        name: "verify-catalog",
        summary: "Check a catalog: well formed, signed by a trusted key, unexpired, serial not below the last seen.",
        arguments: [ArgumentSpec("CATALOG", help: "The catalog file (its note is CATALOG.hcsig).")],
        options: [
            SigningOptions.trustedKey.required(),
            OptionSpec("min-serial", value: "N", help: "Refuse a serial below N, the highest already seen (default 0)."),
            OptionSpec("signature", value: "FILE", help: "The signed note (default: CATALOG.hcsig)."),
            OptionSpec("json", help: "Print one JSON object on stdout."),
            OptionSpec("quiet", short: "q", help: "Print nothing; only the exit code tells."),
        ],
        discussion: """
            Exit status: 0 only for a well-formed catalog validly signed by a trusted key, matching its note,
            unexpired, with serial >= --min-serial; 1 otherwise; 2 usage error; 3 unreadable catalog.
            """)

    let path: String
    let policy: CatalogPolicy
    let json: Bool
    let quiet: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        let name = Self.spec.name
        path = context.absolutePath(arguments.argument(0) ?? "")
        let keys = try SigningOptions.trustedKeys(arguments, context: context, command: name)
        guard !keys.isEmpty else { throw UsageError("missing --trusted-key PUB (the keys the catalog must be signed by)", command: name) }
        let minimum = try arguments.integer("min-serial") ?? 0
        guard minimum >= 0 else { throw UsageError("--min-serial must not be negative", command: name) }
        policy = CatalogPolicy(
            trustedKeys: keys, minimumSerial: minimum, signaturePath: arguments.value("signature").map(context.absolutePath))
        json = arguments.flag("json")
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let result = try CatalogVerifier.verify(path, policy: policy)
        if json {
            context.out(
                JSONValue.object([
                    ("valid", .bool(result.isValid)),
                    ("serial", result.catalog.map { .number($0.serial) } ?? .null),
                    ("expires", result.catalog?.expires.map { .string(PackageStatement.format($0)) } ?? .null),
                    ("signers", .array(result.signers.map { .object([("name", .string($0.name)), ("keyHash", .string($0.keyHash))]) })),
                    ("problems", .array(result.problems.map(JSONValue.string))),
                ]).rendered() + "\n")
        } else if !quiet {
            for problem in result.problems { context.out("error: \(problem)\n") }
            if result.isValid, let catalog = result.catalog {
                let signers = result.signers.map { "\($0.name) (\($0.keyHash))" }.joined(separator: ", ")
                context.out("\(path): valid catalog, serial \(catalog.serial), \(catalog.packages.count) products, signed by \(signers)\n")
            } else {
                context.out("\(path): NOT valid\n")
            }
        }
        return result.isValid ? ExitCode.success : ExitCode.invalid
    }
}
