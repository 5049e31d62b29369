/// Installing a delta (docs/self-hosting.md): the same install as for the full version, where the files the
/// delta does not carry come from DEST itself. Before anything is placed, DEST must hold the delta's base
/// (receipt: product, base version, base plist SHA-256) and every carried-over file with the new version's
/// size and SHA-256; the plan then finds those files in place, exactly as a full install of NEW would.
extension InstallSession {
    /// The listed files the delta does not carry, each with the size and SHA-256 the new version records: the
    /// delta's own records or, when the delta names their digest (`DeltaBase.unchangedSHA256`), DEST's
    /// receipt's, checked against it.
    func carriedFiles(_ report: VerificationReport, package: Package, archive: String) throws(HCPackError) -> [InstalledFile] {
        guard let info = report.contentInfo, let listed = info.files, let delta = report.deltaBase else { return [] }
        let records = (try? info.integrityRecords()) ?? nil
        var present: Set<String> = []
        for entry in report.snapshot.entries where entry.kind == .file && entry.path.hasPrefix(Verifier.contentsPrefix) {
            present.insert(String(entry.path.dropFirst(Verifier.contentsPrefix.count)))
        }
        // Patched files are made from DEST's copies instead (DeltaPatchInstall.swift).
        let patched = FilePatch.patchedPaths(of: info)
        var carried: [InstalledFile] = []
        var unrecorded: [String] = []  // left in place, their records taken from DEST's receipt
        for path in listed where !present.contains(path) && !patched.contains(path) {
            // Verify's rules refuse these before install gets here; this only guards against a rule relaxed later.
            guard PackagePath.unsafeArchiveNameReason(path) == nil,
                path.split(separator: "/").first != Substring(Installer.metadataFolder),
                records?[path] != nil || delta.unchangedSHA256 != nil
            else {
                throw HCPackError(
                    .invalidPackage, "\(archive): Contents/\(path) is neither carried nor recorded by the delta; run hcpack verify on it",
                    path: archive)
            }
            // With a digest, every file left in place is held to it, recorded by the delta or not.
            if delta.unchangedSHA256 == nil, let record = records?[path] {
                carried.append(InstalledFile(path: path, size: record.size, sha256: record.sha256))
            } else {
                unrecorded.append(path)
            }
        }
        if let digest = delta.unchangedSHA256 {
            carried += try unchangedFiles(unrecorded, digest: digest, delta: delta, package: package, archive: archive)
        }
        return carried
    }

    /// The records of `paths` that DEST's receipt holds, when they are the ones `digest` names. Refuses the
    /// delta otherwise: DEST then does not hold the base the delta was made from.
    func unchangedFiles(_ paths: [String], digest: String, delta: DeltaBase, package: Package, archive: String) throws(HCPackError)
        -> [InstalledFile]
    {
        let receipt = try baseReceipt(delta, package: package, archive: archive)
        let owned = receipt.recordsByPath
        var files: [InstalledFile] = []
        files.reserveCapacity(paths.count)
        var missing: [String] = []
        for path in paths {
            guard let record = owned[path] else {
                missing.append(path)
                continue
            }
            files.append(InstalledFile(path: path, size: record.size, sha256: record.sha256))
        }
        let remedy = "install the full archive of \(package.productIdentifier) \(package.version.text) instead"
        guard missing.isEmpty else {
            let shown = missing.prefix(5).map { "Contents/" + $0 }.joined(separator: ", ") + (missing.count > 5 ? ", ..." : "")
            throw HCPackError(
                .invalidPackage,
                "\(destinationPath): the receipt of '\(package.productIdentifier)' \(receipt.version) does not record \(missing.count == 1 ? "a file" : "\(missing.count) files") that \(archive) leaves in place (\(shown)); nothing was changed; \(remedy)",
                path: destinationPath)
        }
        guard DeltaBase.unchangedDigest(files.map { ($0.path, $0.record) }) == digest else {
            throw HCPackError(
                .invalidPackage,
                "\(destinationPath): the files \(archive) leaves in place are not recorded there as in the version it makes (its UnchangedSHA256 differs from the receipt's records); nothing was changed; \(remedy)",
                path: destinationPath)
        }
        return files
    }

    /// `listed` without the carried paths.
    static func removing(_ carried: [InstalledFile], from listed: [String]?) -> [String]? {
        let paths = Set(carried.map(\.path))
        return listed?.filter { !paths.contains($0) }
    }

    /// Refuses the delta unless DEST holds its base (or already the version it makes) and every file it does
    /// not carry, unchanged. Reads only; DEST is untouched when this throws.
    func checkBase(_ delta: DeltaBase, package: Package, carried: [InstalledFile], archive: String) throws(HCPackError) {
        let target = "\(package.productIdentifier) \(package.version.text)"
        let remedy = "install the full archive of \(target) instead"
        _ = try baseReceipt(delta, package: package, archive: archive)
        var damaged: [String] = []
        lastInspected = nil
        for file in carried {
            _ = try findInPlace(
                file.path, [file.record], needing: "\(target) has \(file.size) bytes, SHA-256 \(file.sha256)", damaged: &damaged)
        }
        lastInspected = nil
        guard damaged.isEmpty else {
            throw damagedFiles(damaged, rule: nil, "\(archive) does not carry {files} it needs from \(destinationPath)", remedy: remedy)
        }
    }

    /// DEST's receipt of the product when it is the delta's base or already the version the delta makes.
    /// Read once per install. Refuses the delta otherwise; reads only.
    func baseReceipt(_ delta: DeltaBase, package: Package, archive: String) throws(HCPackError) -> InstallReceipt {
        if let deltaBaseReceipt { return deltaBaseReceipt }
        let identifier = package.productIdentifier
        let remedy = "install the full archive of \(identifier) \(package.version.text) instead"
        let receipts = try metadata.openDirectory(Installer.receiptsFolder)
        let receipt = try usableReceipt(identifier, in: receipts)
        guard let receipt else {
            throw HCPackError(
                .invalidPackage,
                "\(archive) is a delta from version \(delta.baseVersion) of '\(identifier)', which \(destinationPath) does not have installed; \(remedy)",
                path: destinationPath)
        }
        let installed = ContentVersion(receipt.version)
        let isTarget = installed == package.version && receipt.plistSHA256 == delta.targetPlistSHA256
        if !isTarget {
            guard installed == ContentVersion(delta.baseVersion) else {
                throw HCPackError(
                    .invalidPackage,
                    "\(destinationPath) has version \(receipt.version) of '\(identifier)'; \(archive) updates version \(delta.baseVersion) only; \(remedy)",
                    path: destinationPath)
            }
            guard let recorded = receipt.plistSHA256 else {
                throw HCPackError(
                    .invalidPackage,
                    "\(destinationPath): the receipt of '\(identifier)' \(receipt.version) does not record its ContentInfo.plist's SHA-256 (an older hcpack installed it), so the delta's base cannot be confirmed; \(remedy)",
                    path: destinationPath)
            }
            guard recorded == delta.basePlistSHA256 else {
                throw HCPackError(
                    .invalidPackage,
                    "\(destinationPath) has another build of '\(identifier)' \(receipt.version) (plist SHA-256 \(recorded)) than the delta's base (\(delta.basePlistSHA256)); \(remedy)",
                    path: destinationPath)
            }
        }
        deltaBaseReceipt = receipt
        return receipt
    }

    /// Looks at DEST's copy of `path`: the record of `records` it holds, noted for planning (which then finds
    /// it in place without reading it again), or nil after adding to `damaged` why it holds none. Callers set
    /// `lastInspected` to nil before and after a run of calls (a folder from the streaming phase may be stale).
    /// - Parameter needing: what the delta needs there, for the line in `damaged`.
    func findInPlace(_ path: String, _ records: [FileRecord], needing: String, damaged: inout [String]) throws(HCPackError)
        -> FileRecord?
    {
        let location = destinationPath + "/" + path
        switch try inspect(path) {
        case .file(let size):
            if let found = try matches(path, size: size, records) {
                hashedInPlace[path] = found
                return found
            }
            damaged.append("\(location) changed since it was installed (\(needing))")
        case .absent:
            damaged.append("\(location) is missing (\(needing))")
        case .other(let kind):
            damaged.append("\(location) is a \(kind.noun), not the installed file (\(needing))")
        case .blocked(let message):
            damaged.append(message)
        }
        return nil
    }

    /// The refusal of a delta for the DEST files in `damaged` (from `findInPlace`), one a line: nothing was
    /// changed, and the full archive restores them. `{files}` in `what` becomes "a file" or "N files".
    func damagedFiles(_ damaged: [String], rule: Rule?, _ what: String, remedy: String) -> HCPackError {
        // One line each: files below one blocked folder all report the folder (review: the same line 6 times).
        var seen: Set<String> = []
        let damaged = damaged.filter { seen.insert($0).inserted }
        let files = damaged.count == 1 ? "a file" : "\(damaged.count) files"
        return HCPackError(
            .invalidPackage,
            (rule.map { "[\($0.rawValue)] " } ?? "") + what.replacingOccurrences(of: "{files}", with: files)
                + "; nothing was changed; \(remedy) (it restores them):\n  " + damaged.joined(separator: "\n  "),
            path: destinationPath)
    }

    /// A carried-over file the plan would place changed after `checkBase` looked: its bytes are not at hand.
    func checkCarriedStayInPlace(_ plan: Plan, carried: [InstalledFile]) throws(HCPackError) {
        let paths = Set(carried.map(\.path))
        for file in plan.place where paths.contains(file.path) {
            throw HCPackError(
                .invalidPackage,
                "\(destinationPath)/\(file.path) changed while the delta was being installed; nothing was changed; run the install again",
                path: destinationPath + "/" + file.path)
        }
    }
}
