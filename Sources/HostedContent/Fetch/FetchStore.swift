import Foundation

/// `DIR/.hcpack/fetch/`: what fetch keeps between runs (docs/fetch.md, "The bookkeeping folder").
///
/// - `lock`: held by one fetch at a time (installs take `DIR/.hcpack/lock` themselves);
/// - `<sha256>.download`: a partial or finished download, named by the SHA-256 it must have; beside it
///   `<sha256>.download.http`, the validator (ETag or Last-Modified) its bytes came with;
/// - `serial`: the highest catalog serial accepted, under any trusted key.
///
/// Which catalog an installed version came from is in its receipt (`InstallReceipt.catalog`), not here.
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

    /// The one high-water mark of accepted catalog serials, whichever trusted key signed them.
    static let serialName = "serial"
    /// Per-key marks written by earlier hcpack (`serial-<keyhash>-<name>`): read (the highest counts), then
    /// removed once `serial` holds at least as much.
    static let legacySerialPrefix = "serial-"

    /// The highest catalog serial accepted in this DIR under any trusted key (a key rotation does not reset
    /// it: an old catalog signed by the retiring key is still a replay); nil when none was accepted yet.
    /// - Throws: `.io` for a mark that is not a number, saying what to do.
    func acceptedSerial() throws(HCPackError) -> Int64? {
        var highest: Int64?
        for name in try folder.list() where name == Self.serialName || name.hasPrefix(Self.legacySerialPrefix) {
            let value = try readSerial(name)
            highest = max(highest ?? value, value)
        }
        return highest
    }

    private func readSerial(_ name: String) throws(HCPackError) -> Int64 {
        let damaged = HCPackError(
            .io, "\(describe(name)) is damaged; remove it only if you trust the catalog you fetch next", path: describe(name))
        guard try folder.status(name)?.kind == .file, let bytes = try folder.readFile(name, limit: 64),
            let value = Int64(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw damaged }
        return value
    }

    /// Records `serial` as the high-water mark (the caller checked it is not lower), and removes the per-key
    /// marks of earlier hcpack it supersedes.
    func recordSerial(_ serial: Int64) throws(HCPackError) {
        try folder.writeAtomically(Self.serialName, Array("\(serial)\n".utf8))
        for name in try folder.list() where name.hasPrefix(Self.legacySerialPrefix) {
            if let value = try? readSerial(name), value <= serial { _ = try folder.removeFile(name) }
        }
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

    /// Largest validator file read; ours hold a header value and a URL.
    static let validatorLimit = 16 << 10

    /// The partial (or finished) download of the file with this SHA-256, and the validator its bytes came with.
    ///
    /// This folder is fetch's own: a download that is not a regular file (a symlink, a FIFO, a folder) or has
    /// another name elsewhere (a hard link: writing would change that file too), or a validator file that is
    /// not one fetch writes, was put there by someone else. It is removed (only this name), never followed,
    /// read or written through, and the download starts again from zero, so a rerun does not fail the same way
    /// forever.
    func partial(_ sha256: String) throws(HCPackError) -> (UpdatableFile, validator: String?) {
        let name = Self.downloadName(sha256)
        let sidecar = Self.validatorName(sha256)
        var restart = false
        if let status = try folder.status(name), status.kind != .file || status.linkCount > 1 {
            try folder.removeTree(name)
            restart = true
        }
        var text: String?
        if let status = try folder.status(sidecar) {
            if status.kind == .file, status.size <= Self.validatorLimit,
                let bytes = try folder.readFile(sidecar, limit: Self.validatorLimit)
            {
                text = String(decoding: bytes, as: UTF8.self)
            } else {
                try folder.removeTree(sidecar)
                restart = true
            }
        }
        let file = try folder.openForUpdate(name)
        if restart {
            // Bytes whose validator is unknown could not be resumed with If-Range: start from zero.
            do throws(HCPackError) {
                try file.truncate(to: 0)
            } catch {
                file.close()
                throw error
            }
            return (file, nil)
        }
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
        // removeTree: a folder planted under either name goes too (symlinks are unlinked, never followed).
        try folder.removeTree(Self.downloadName(sha256))
        try folder.removeTree(Self.validatorName(sha256))
    }

    /// Removes downloads (partial or whole) of files the catalog no longer names, and their validators: a run
    /// killed between an install and the removal of its archive leaves it behind, and a new catalog makes
    /// older partials useless.
    func pruneDownloads(keeping wanted: Set<String>) throws(HCPackError) {
        for name in try folder.list() {
            if name.hasSuffix(".tmp") {
                // A record a kill left before its rename (`writeAtomically`); under the lock nobody writes it.
                try folder.removeTree(name)
            } else if name.hasSuffix(".download") {
                let sha256 = String(name.dropLast(".download".count))
                if !wanted.contains(sha256) { try removeDownload(sha256) }
            } else if name.hasPrefix("installed-") && name.hasSuffix(".json") {
                // Earlier hcpack kept the catalog of an installed version here; the receipt holds it now.
                try folder.removeTree(name)
            }
        }
    }
}
