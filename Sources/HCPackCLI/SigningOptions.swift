import Foundation
import HostedContent

/// The options that sign (sign, build --sign-key) and check signatures (verify, install), declared once.
enum SigningOptions {
    static let trustedKey = OptionSpec(
        "trusted-key", value: "PUB", repeatable: true,
        help: "Require a valid signature by this key: a .pub file, a file of key lines, or a key line; repeatable.")
    static let signature = OptionSpec("signature", value: "FILE", help: "The signed note (default: ARCHIVE.hcsig).")
    static let keyName = OptionSpec("key-name", value: "NAME", help: "The key's name, for a key not made by hcpack keygen.")
    static let expires = OptionSpec(
        "expires", value: "DATE|DURATION", help: "Expiry: UTC time (2027-06-01T00:00:00Z) or duration from now (90d, 12h).")

    /// The signature policy of `--trusted-key` and `--signature`; nil without `--trusted-key`.
    static func policy(_ arguments: ParsedArguments, context: Context, command: String) throws(UsageError) -> SignaturePolicy? {
        let values = arguments.values("trusted-key")
        guard !values.isEmpty else {
            if arguments.value("signature") != nil && command == "install" {
                throw UsageError("--signature needs --trusted-key (the keys to check it with)", command: command)
            }
            return nil
        }
        let keys = try trustedKeys(arguments, context: context, command: command)
        return SignaturePolicy(trustedKeys: keys, signaturePath: arguments.value("signature").map(context.absolutePath))
    }

    /// Every key of every `--trusted-key`.
    static func trustedKeys(_ arguments: ParsedArguments, context: Context, command: String) throws(UsageError) -> [VerifierKey] {
        var keys: [VerifierKey] = []
        for value in arguments.values("trusted-key") {
            do {
                keys += try VerifierKey.load(value, relativeTo: context.currentDirectory)
            } catch {
                throw UsageError(error.message, command: command)
            }
        }
        return keys
    }

    /// `--expires`, parsed against the current time; nil when not given.
    static func expiry(_ arguments: ParsedArguments, command: String) throws(UsageError) -> Date? {
        guard let text = arguments.value("expires") else { return nil }
        guard let date = PackageStatement.expiry(text, now: Date()) else {
            throw UsageError(
                "--expires '\(text)' is neither a UTC time (2027-06-01T00:00:00Z) nor a duration (90d, 12h, 30m, 2w)",
                command: command)
        }
        return date
    }

    /// The signature's part of verify's JSON report.
    static func json(_ summary: SignatureSummary?) -> JSONValue {
        guard let summary else { return .null }
        let trusted = Set(summary.trustedSigners)
        return .object([
            ("present", .bool(summary.isPresent)),
            ("path", .string(summary.path)),
            ("malformed", summary.malformed.map(JSONValue.string) ?? .null),
            (
                "signers",
                .array(
                    summary.signers.map {
                        .object([
                            ("name", .string($0.name)), ("keyHash", .string($0.keyHash)),
                            ("trusted", .bool(trusted.contains($0))),
                        ])
                    })
            ),
            ("expires", summary.expires.map { .string(PackageStatement.format($0)) } ?? .null),
            ("valid", summary.isValid.map(JSONValue.bool) ?? .null),
        ])
    }

    /// One line about the signature, for verify's text report.
    static func text(_ summary: SignatureSummary?) -> String {
        guard let summary else { return "" }
        guard summary.isPresent else { return "signature: none (\(summary.path) does not exist)\n" }
        if let malformed = summary.malformed { return "signature: \(summary.path): malformed: \(malformed)\n" }
        let trusted = Set(summary.trustedSigners)
        let signers = summary.signers.map { "\($0.name) (\($0.keyHash))\(trusted.contains($0) ? " trusted" : "")" }
        var text = "signature: \(summary.path): signed by \(signers.joined(separator: ", "))"
        if let expires = summary.expires { text += "; expires \(PackageStatement.format(expires))" }
        switch summary.isValid {
        case true?: text += "; valid"
        case false?: text += "; NOT valid"
        case nil: text += "; not checked (pass --trusted-key)"
        }
        return text + "\n"
    }
}

extension JSONValue {
    /// An object with `member` added at the end (other values unchanged).
    func appending(_ key: String, _ value: JSONValue) -> JSONValue {
        guard case .object(let members) = self else { return self }
        return .object(members + [(key, value)])
    }
}
