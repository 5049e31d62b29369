import Digest
import Foundation


/// A private key that signs notes, with its name. Loaded from a PKCS#8 PEM file (`hcpack keygen`, or
/// `openssl genpkey -algorithm ed25519`) or from an environment variable holding the PEM (`env:VAR`).
///
/// The key material never appears in a message, description or output.
public final class SigningKey: CustomStringConvertible {
    /// The line before the PEM block in which `hcpack keygen` records the key's name (OpenSSL skips it).
    public static let namePrefix = "hcpack-key-name: "
    /// Largest key file read.
    static let maxFileBytes = 64 << 10

    /// The key's name (in its verifier key and signature lines).
    public let name: String
    let key: Ed25519PrivateKey

    init(name: String, key: Ed25519PrivateKey) {
        self.name = name
        self.key = key
    }

    /// The public half, as a verifier key line shows it.
    public var verifierKey: VerifierKey {
        get throws(HCPackError) { try VerifierKey(name: name, publicKey: key.publicKey) }
    }

    public var description: String { "SigningKey(\(name))" }

    /// A new random key named `name`.
    public static func generate(name: String) throws(HCPackError) -> SigningKey {
        guard VerifierKey.isValidName(name) else { throw VerifierKey.badName(name) }
        do {
            return SigningKey(name: name, key: try Ed25519PrivateKey.generate())
        } catch {
            throw HCPackError(.io, error.message)
        }
    }

    /// The PEM file's bytes: the name line, then the PKCS#8 block (what `openssl pkey` reads).
    public func pem() -> [UInt8] {
        var der = key.pkcs8()
        defer { Ed25519PrivateKey.wipe(&der) }
        return PEMBlock(label: "PRIVATE KEY", der: der, preamble: [Self.namePrefix + name]).encoded()
    }

    /// The signature line of `text` by this key.
    public func sign(_ text: [UInt8]) throws(HCPackError) -> NoteSignature {
        let verifier = try verifierKey
        do {
            return NoteSignature(name: name, keyHash: verifier.keyHash, signature: try key.sign(text))
        } catch {
            throw HCPackError(.io, "signing with key '\(name)' failed: \(error.message)")
        }
    }

    /// Loads the key `source` names: a file path (relative to `directory`), or `env:VAR` for the PEM in that
    /// environment variable. `name` overrides the name the PEM records; a PEM without one needs it.
    /// - Throws: `.permissionDenied` for a key file that group or others may read (`chmod 600`), `.notFound`,
    ///   `.invalidRequest` for what is not an unencrypted Ed25519 PKCS#8 key or has no name.
    public static func load(
        _ source: String, name: String?, environment: [String: String], relativeTo directory: String
    ) throws(HCPackError) -> SigningKey {
        var bytes: [UInt8]
        let label: String
        if source.hasPrefix("env:") {
            let variable = String(source.dropFirst(4))
            guard let value = environment[variable], !value.isEmpty else {
                throw HCPackError(
                    .notFound, "the environment variable \(variable) is not set or empty; put the key's PEM in it (the CI secret)"
                )
            }
            bytes = Array(value.utf8)
            label = "the key in $\(variable)"
        } else {
            let path = source.hasPrefix("/") ? source : directory + "/" + source
            guard let status = try FileSystem.status(path) else {
                throw HCPackError(
                    .notFound, "\(path): no such key file; make one with 'hcpack keygen --name NAME -o \(source)'", path: path)
            }
            guard status.kind == .file else {
                throw HCPackError(.invalidRequest, "\(path) is a \(status.kind.noun), not a key file", path: path)
            }
            if status.permissions & 0o077 != 0 {
                throw HCPackError(
                    .permissionDenied,
                    "\(path): the private key may be read by group or others (mode \(String(status.permissions & 0o777, radix: 8))); run 'chmod 600 \(path)'",
                    path: path)
            }
            bytes = try FileSystem.readFile(path, limit: maxFileBytes)
            label = path
        }
        defer { Ed25519PrivateKey.wipe(&bytes) }
        return try parse(bytes, name: name, label: label)
    }

    /// The key of PEM `bytes`; `label` names where they came from in errors (never the bytes themselves).
    static func parse(_ bytes: [UInt8], name: String?, label: String) throws(HCPackError) -> SigningKey {
        guard var block = PEMBlock.decode(bytes) else {
            throw HCPackError(
                .invalidRequest,
                "\(label): not a PEM private key; make one with 'hcpack keygen' or 'openssl genpkey -algorithm ed25519'")
        }
        defer { Ed25519PrivateKey.wipe(&block.der) }
        if block.label == "ENCRYPTED PRIVATE KEY" {
            throw HCPackError(
                .invalidRequest,
                "\(label): the key is encrypted; hcpack reads unencrypted keys only (keep them in a CI secret or a 0600 file)")
        }
        guard block.label == "PRIVATE KEY" else {
            throw HCPackError(.invalidRequest, "\(label): a PEM '\(block.label)', not a PKCS#8 'PRIVATE KEY'")
        }
        let key: Ed25519PrivateKey
        do {
            key = try Ed25519PrivateKey(pkcs8: block.der)
        } catch {
            throw HCPackError(.invalidRequest, "\(label): \(error.message)")
        }
        let recorded = block.preamble.last { $0.hasPrefix(namePrefix) }.map { String($0.dropFirst(namePrefix.count)) }
        guard let chosen = name ?? recorded else {
            throw HCPackError(
                .invalidRequest,
                "\(label) does not record a key name (it was not made by hcpack keygen); pass --key-name NAME (or --name for pubkey)"
            )
        }
        guard VerifierKey.isValidName(chosen) else { throw VerifierKey.badName(chosen) }
        return SigningKey(name: chosen, key: key)
    }

    /// Writes the key to `path` (mode 0600) and its verifier key line to `path.pub`, refusing to replace
    /// either: each is written to a temporary name and hard-linked into place (`linkat` never replaces).
    public func write(to path: String) throws(HCPackError) {
        let pubPath = path + ".pub"
        for existing in [path, pubPath] where FileSystem.exists(existing) {
            throw HCPackError(
                .invalidRequest, "\(existing) already exists; hcpack keygen never replaces a key, choose another name",
                path: existing)
        }
        let line = try verifierKey.line + "\n"
        try Self.writeNew(path, bytes: pem(), mode: 0o600)
        do {
            try Self.writeNew(pubPath, bytes: Array(line.utf8), mode: 0o644)
        } catch {
            FileSystem.removeFile(path)
            throw error
        }
    }

    /// The folder of `path` ("." for a bare name) and its last component.
    static func folderAndName(_ path: String) -> (folder: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        return (slash == path.startIndex ? "/" : String(path[..<slash]), String(path[path.index(after: slash)...]))
    }

    /// Creates `path` with `bytes` and `mode`, failing if the name is taken.
    static func writeNew(_ path: String, bytes: [UInt8], mode: FileMode) throws(HCPackError) {
        let (folderPath, name) = folderAndName(path)
        let folder = try DirectoryHandle.open(folderPath)
        let temporary = ".\(name).\(ProcessInfo.processInfo.processIdentifier).tmp"
        var secret = bytes
        defer { Ed25519PrivateKey.wipe(&secret) }
        do throws(HCPackError) {
            let file = try folder.createFile(temporary, mode: mode)
            try file.write(secret)
            try file.finish(mode: mode)
            try folder.link(temporary, to: folder, name)
        } catch {
            _ = try? folder.removeFile(temporary)
            if error.code == .io, FileSystem.exists(path) {
                throw HCPackError(.invalidRequest, "\(path) already exists; choose another name", path: path)
            }
            throw error
        }
        _ = try? folder.removeFile(temporary)
        try folder.synchronize()
    }
}
