/// DEST's own records (receipts and journals) read as the untrusted input they are: whoever can write to DEST
/// can write them. Size-limited, every path held to the rules of an archive entry to install, and an unusable
/// record is an error that says how to recover, never an operation outside DEST.
enum InstallRecords {
    /// Largest receipt or journal read back: about 256 bytes a file for as many files as an archive may hold
    /// entries, and never more than 96 MiB (500,000 files at the 180 bytes a file hcpack writes on average,
    /// twice the package the plist limits are sized for). A bigger one was not written by hcpack.
    static func byteLimit(_ limits: ReadLimits) -> Int {
        let perFile = 256
        let entries = max(0, min(maxFiles(limits), Int.max / perFile - 1))
        return min((64 << 10) + entries * perFile, 96 << 20)
    }

    /// Most files a record may list: the default entry limit, or the user's --max-entries when larger. Never
    /// fewer: a lower --max-entries for one install must not make an honest receipt of a larger one unusable.
    static func maxFiles(_ limits: ReadLimits) -> Int { max(limits.archive.maxEntries, ReadLimits().archive.maxEntries) }

    /// Why `path` cannot be a file installed into DEST, or nil: the rules an archive entry to install is held
    /// to (no `..`, nothing absolute, no empty component, nothing under `.hcpack/`, the length limits).
    static func unusablePathReason(_ path: String) -> String? {
        if let reason = PackagePath.unsafeArchiveNameReason(path) { return reason }
        if let first = InstallSession.firstComponent(of: path), Installer.isMetadataFolder(first) {
            return "inside \(Installer.metadataFolder)/, where hcpack keeps its records"
        }
        if path.utf8.count > PackagePath.maxPathBytes || PackagePath.longestComponentBytes(path) > PackagePath.maxComponentBytes {
            return "longer than \(PackagePath.maxPathBytes) bytes or a name over \(PackagePath.maxComponentBytes) bytes"
        }
        return nil
    }

    /// Why the files of a record cannot be trusted, or nil.
    static func unusableReason(_ files: [InstalledFile], limits: ReadLimits) -> String? {
        if files.count > maxFiles(limits) {
            return "it lists \(files.count) files, more than an archive may hold (\(maxFiles(limits)))"
        }
        // One path twice: which record a reader believes would be its own choice (install took the first).
        var seen = Set<ExactPath>(minimumCapacity: files.count)
        for file in files {
            if !seen.insert(ExactPath(file.path)).inserted {
                return "it lists '\(PackagePath.printable(file.path))' twice"
            }
            if let reason = unusablePathReason(file.path) {
                return "it lists '\(PackagePath.printable(file.path))' (\(reason)), a path hcpack never installs"
            }
            if file.size < 0 { return "it lists '\(PackagePath.printable(file.path))' with a negative size" }
        }
        return nil
    }

    /// How to recover from an unusable record.
    enum Remedy {
        /// Reinstall the product with --force, or remove the file.
        case force
        /// Remove the file by hand: --trusted-key never sets a receipt aside (its version cannot be known).
        case removeByHand
    }

    /// The error for an unusable record, saying how to recover.
    static func unusable(_ path: String, _ reason: String, productIdentifier: String, remedy: Remedy = .force) -> HCPackError {
        let advice =
            switch remedy {
            case .force: "reinstall '\(productIdentifier)' with --force (which sets the record aside), or remove the file"
            case .removeByHand:
                "with --trusted-key, --force does not set it aside (the version it records cannot be known, so a downgrade could not be refused); remove the file by hand if DEST holds no newer version of '\(productIdentifier)'"
            }
        return HCPackError(
            .invalidPackage, "\(path) is not a record hcpack wrote (\(reason)), so nothing it lists is touched; \(advice)", path: path)
    }

    /// The receipt of `productIdentifier` in `receipts`; nil when there is none.
    /// - Throws: `unusable` when the file is there but cannot be trusted (damaged, too big, for another
    ///   product, a path outside the rules); the environment's errors.
    static func receipt(
        _ productIdentifier: String, in receipts: DirectoryHandle?, limits: ReadLimits, remedy: Remedy = .force
    ) throws(HCPackError) -> InstallReceipt? {
        guard let receipts else { return nil }
        return try receipt(named: Installer.receiptName(productIdentifier), in: receipts, limits: limits, remedy: remedy)
    }

    /// The receipt in the file `name` of `receipts`; nil when there is no such file.
    static func receipt(named name: String, in receipts: DirectoryHandle, limits: ReadLimits, remedy: Remedy = .force)
        throws(HCPackError) -> InstallReceipt?
    {
        let path = receipts.describe(name)
        let product = name.hasSuffix(".json") ? String(name.dropLast(".json".count)) : name
        guard let bytes = try read(name, in: receipts, limits: limits, productIdentifier: product, remedy: remedy) else {
            return nil
        }
        guard let receipt = InstallReceipt.decode(bytes) else {
            throw unusable(
                path, "it is not a receipt in format \(InstallReceipt.currentFormat)", productIdentifier: product, remedy: remedy)
        }
        // Another product's name on it would make this product's files look owned by a second product.
        if Installer.receiptName(receipt.productIdentifier) != name {
            throw unusable(path, "it records product '\(receipt.productIdentifier)'", productIdentifier: product, remedy: remedy)
        }
        if let reason = unusableReason(receipt.files, limits: limits) {
            throw unusable(path, reason, productIdentifier: product, remedy: remedy)
        }
        return receipt
    }

    /// The journal of `productIdentifier` in `metadata`; nil when there is none.
    static func journal(_ productIdentifier: String, in metadata: DirectoryHandle, limits: ReadLimits) throws(HCPackError)
        -> InstallJournal?
    {
        let name = Installer.journalName(productIdentifier)
        let path = metadata.describe(name)
        guard let bytes = try read(name, in: metadata, limits: limits, productIdentifier: productIdentifier) else { return nil }
        guard let journal = InstallJournal.decode(bytes) else {
            throw unusable(
                path, "it is not a journal in format \(InstallReceipt.currentFormat)", productIdentifier: productIdentifier)
        }
        if journal.productIdentifier != productIdentifier {
            throw unusable(path, "it records product '\(journal.productIdentifier)'", productIdentifier: productIdentifier)
        }
        if let reason = unusableReason(journal.files, limits: limits) {
            throw unusable(path, reason, productIdentifier: productIdentifier)
        }
        return journal
    }

    private static func read(
        _ name: String, in folder: DirectoryHandle, limits: ReadLimits, productIdentifier: String, remedy: Remedy = .force
    ) throws(HCPackError) -> [UInt8]? {
        let limit = byteLimit(limits)
        guard let status = try folder.status(name) else { return nil }
        // Checked before reading: a planted 267 MB record cost 17 s and 1.4 GB to parse.
        guard status.kind == .file, status.size <= Int64(limit) else {
            let reason = status.kind == .file ? "larger than \(limit) bytes" : "a \(status.kind.noun), not a file"
            throw unusable(folder.describe(name), reason, productIdentifier: productIdentifier, remedy: remedy)
        }
        return try folder.readFile(name, limit: limit)
    }
}
