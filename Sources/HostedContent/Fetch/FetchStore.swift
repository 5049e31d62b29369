import Foundation

/// `DIR/.hcpack/fetch/`: what fetch keeps between runs (docs/fetch.md, "The bookkeeping folder").
///
/// - `lock`: held by one fetch at a time (installs take `DIR/.hcpack/lock` themselves);
/// - `<sha256>.download`: a partial or finished download, named by the SHA-256 it must have; beside it
///   `<sha256>.download.http`, the validator (ETag or Last-Modified) its bytes came with;
/// - `serial-<keyhash>-<name>`: the highest catalog serial accepted from that signing key;
/// - `installed-<product>.json`: the catalog serial and signers an installed version came from.
final class FetchStore {
    static let folderName = "fetch"
    static let lockName = "lock"

    let path: String
    let destination: DirectoryHandle
    let folder: DirectoryHandle
    private let lock: LockFile

    /// Opens (creating) the bookkeeping folder of `destination` and takes its lock.
    /// - Throws: `.notFound` for a missing DIR, `.permissionDenied` for a symlink, `.locked` when another fetch
    ///   runs there.
    init(destination path: String) throws(HCPackError) {
        self.path = path
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such folder; create the destination folder first", path: path)
        }
        guard status.kind == .directory else {
            throw HCPackError(
                status.kind == .symlink ? .permissionDenied : .notFound,
                "\(path) is a \(status.kind.noun), not a folder; pass a real folder", path: path)
        }
        destination = try DirectoryHandle.open(path)
        let (metadata, _) = try destination.makeDirectory(Installer.metadataFolder)
        (folder, _) = try metadata.makeDirectory(Self.folderName)
        switch try LockFile.acquire(Self.lockName, in: folder, wait: false) {
        case .acquired(let lock): self.lock = lock
        case .busy, .replaced:
            throw HCPackError(.locked, "another hcpack fetch is running in \(path); wait for it to finish", path: path)
        }
    }

    deinit { lock.release() }

    /// Where bookkeeping files are, for messages.
    func describe(_ name: String) -> String { folder.describe(name) }

    // MARK: serials

    private static func serialName(_ signer: NoteSigner) -> String {
        let safe = String(signer.name.unicodeScalars.map { scalar -> Character in
            CharacterSet.alphanumerics.contains(scalar) || scalar == "." || scalar == "-" ? Character(scalar) : "_"
        })
        return "serial-\(signer.keyHash)-\(safe)"
    }

    /// The highest serial accepted from `signer` in this DIR; nil never.
    func acceptedSerial(_ signer: NoteSigner) throws(HCPackError) -> Int64? {
        guard let bytes = try folder.readFile(Self.serialName(signer), limit: 64) else { return nil }
        guard let value = Int64(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw HCPackError(
                .io, "\(describe(Self.serialName(signer))) is damaged; remove it only if you trust the catalog you fetch next",
                path: describe(Self.serialName(signer)))
        }
        return value
    }

    func recordSerial(_ serial: Int64, for signer: NoteSigner) throws(HCPackError) {
        try folder.writeAtomically(Self.serialName(signer), Array("\(serial)\n".utf8))
    }

    // MARK: receipts

    /// The receipt of `product` in DIR, read as install reads it (untrusted: limits, path rules).
    /// - Throws: install's error for an unusable receipt, saying how to recover.
    func receipt(_ product: String) throws(HCPackError) -> InstallReceipt? {
        let receipts = try destination.openDirectories([Substring(Installer.metadataFolder), Substring(Installer.receiptsFolder)])
        return try InstallRecords.receipt(product, in: receipts, limits: ReadLimits())
    }

    /// Products the folder at `path` has receipts for; read before anything is written to it.
    static func receiptProducts(in path: String) throws(HCPackError) -> [String] {
        guard let status = try FileSystem.status(path) else {
            throw HCPackError(.notFound, "\(path): no such folder; create the destination folder first", path: path)
        }
        guard status.kind == .directory,
            let receipts = try DirectoryHandle.open(path).openDirectories([
                Substring(Installer.metadataFolder), Substring(Installer.receiptsFolder),
            ])
        else { return [] }
        return try receipts.list().filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }

    // MARK: downloads

    static func downloadName(_ sha256: String) -> String { sha256 + ".download" }
    static func validatorName(_ sha256: String) -> String { sha256 + ".download.http" }

    /// The partial (or finished) download of the file with this SHA-256, and the validator its bytes came with.
    func partial(_ sha256: String) throws(HCPackError) -> (UpdatableFile, validator: String?) {
        let file = try folder.openForUpdate(Self.downloadName(sha256))
        let text = try folder.readFile(Self.validatorName(sha256), limit: 16 << 10).map { String(decoding: $0, as: UTF8.self) }
        let validator = text?.split(separator: "\n").first { $0.hasPrefix("validator ") }.map { String($0.dropFirst(10)) }
        return (file, validator)
    }

    /// Records the validator of the bytes on disk (nil: none, or they were thrown away).
    func recordValidator(_ validator: String?, url: String, for sha256: String) throws(HCPackError) {
        guard let validator, !validator.contains("\n") else {
            _ = try folder.removeFile(Self.validatorName(sha256))
            return
        }
        try folder.writeAtomically(Self.validatorName(sha256), Array("validator \(validator)\nurl \(url)\n".utf8))
    }

    /// The path of a download, for the installer.
    func downloadPath(_ sha256: String) -> String { describe(Self.downloadName(sha256)) }

    /// Removes a download once installed (or refused for good).
    func removeDownload(_ sha256: String) throws(HCPackError) {
        _ = try folder.removeFile(Self.downloadName(sha256))
        _ = try folder.removeFile(Self.validatorName(sha256))
    }

    /// Removes downloads (partial or whole) of files the catalog no longer names, and their validators: a run
    /// killed between an install and the removal of its archive leaves it behind, and a new catalog makes
    /// older partials useless.
    func pruneDownloads(keeping wanted: Set<String>) throws(HCPackError) {
        for name in try folder.list() where name.hasSuffix(".download") {
            let sha256 = String(name.dropLast(".download".count))
            if !wanted.contains(sha256) { try removeDownload(sha256) }
        }
    }

    // MARK: provenance

    /// Records which catalog an installed version came from.
    func recordProvenance(product: String, version: String, serial: Int64, signers: [NoteSigner]) throws(HCPackError) {
        var out: [UInt8] = []
        out += Array("{\n  \"catalogSerial\" : \(serial),\n  \"productIdentifier\" : ".utf8)
        JSONCoding.appendString(product, to: &out)
        out += Array(",\n  \"signers\" : [".utf8)
        for (index, signer) in signers.enumerated() {
            out += Array(((index == 0 ? "\n" : ",\n") + "    { \"keyHash\" : ").utf8)
            JSONCoding.appendString(signer.keyHash, to: &out)
            out += Array(", \"name\" : ".utf8)
            JSONCoding.appendString(signer.name, to: &out)
            out += Array(" }".utf8)
        }
        out += Array(((signers.isEmpty ? "]" : "\n  ]") + ",\n  \"version\" : ").utf8)
        JSONCoding.appendString(version, to: &out)
        out += Array("\n}\n".utf8)
        try folder.writeAtomically("installed-\(product).json", out)
    }
}
