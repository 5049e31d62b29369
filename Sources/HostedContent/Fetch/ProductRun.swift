import Foundation
import Synchronization

/// Why one product stopped.
struct ProductFailure: Error {
    var message: String
    /// Bytes or replies refused (exit 1) rather than the network or disk failing (exit 3).
    var refused: Bool
}

/// Steps 4 to 7 for each selected product, and `--check`'s download-and-verify.
final class ProductRun: Sendable {
    let options: FetchOptions
    let accepted: AcceptedCatalog
    nonisolated(unsafe) let store: FetchStore
    let cancellation: FetchCancellation
    let emit: SerialEmitter
    /// Installs into one DIR take its lock in turn; fetch's own workers wait here instead of failing.
    private let installing = Mutex(())

    init(options: FetchOptions, accepted: AcceptedCatalog, store: FetchStore, cancellation: FetchCancellation, emit: SerialEmitter) {
        self.options = options
        self.accepted = accepted
        self.store = store
        self.cancellation = cancellation
        self.emit = emit
    }

    /// Runs `packages` on up to `jobs` workers, each with its own HTTP client (connections are reused within a
    /// worker); reports in the order of `packages`.
    func parallel(_ packages: [CatalogPackage], jobs: Int, first: Downloader) -> [FetchProductReport] {
        guard jobs > 1, packages.count > 1 else { return packages.map { product($0, downloader: first) } }
        let results = Mutex<[Int: FetchProductReport]>([:])
        let next = Mutex(0)
        // Threads, not concurrentPerform: the workers wait on the network, and concurrentPerform would run no
        // more of them than there are cores.
        let group = DispatchGroup()
        for _ in 0..<min(jobs, packages.count) {
            group.enter()
            WorkerThread.start(name: "hcpack-product") { [self] in
                defer { group.leave() }
                guard let downloader = try? Downloader(limits: options.http, policy: options.retry, cancellation: cancellation) else { return }
                while true {
                    let index = next.withLock { value -> Int in
                        defer { value += 1 }
                        return value
                    }
                    guard index < packages.count else { return }
                    let report = product(packages[index], downloader: downloader)
                    results.withLock { $0[index] = report }
                }
            }
        }
        group.wait()
        let done = results.withLock { $0 }
        return packages.indices.map { index in
            done[index]
                ?? failed(packages[index], from: nil, ProductFailure(message: "libcurl could not be initialized", refused: false))
        }
    }

    /// One product, start to end; failures are in the report.
    func product(_ package: CatalogPackage, downloader: Downloader) -> FetchProductReport {
        var report = FetchProductReport(
            productIdentifier: package.productIdentifier, policy: package.policy, fromVersion: nil, toVersion: package.version,
            method: nil, status: .failed, downloadedBytes: 0, resumedBytes: 0, message: nil, refused: false)
        do {
            if options.checkOnly {
                try check(package, downloader: downloader, report: &report)
            } else {
                try install(package, downloader: downloader, report: &report)
            }
        } catch let failure as ProductFailure {
            return failed(package, report: report, failure)
        } catch let error as HCPackError {
            return failed(package, report: report, ProductFailure(message: error.message, refused: error.code == .invalidPackage))
        } catch {
            return failed(package, report: report, ProductFailure(message: "\(error)", refused: false))
        }
        return report
    }

    private func failed(_ package: CatalogPackage, from: String?, _ failure: ProductFailure) -> FetchProductReport {
        failed(
            package,
            report: FetchProductReport(
                productIdentifier: package.productIdentifier, policy: package.policy, fromVersion: from, toVersion: package.version,
                method: nil, status: .failed, downloadedBytes: 0, resumedBytes: 0, message: nil, refused: false), failure)
    }

    private func failed(_ package: CatalogPackage, report: FetchProductReport, _ failure: ProductFailure) -> FetchProductReport {
        var report = report
        report.status = .failed
        report.message = failure.message
        report.refused = failure.refused
        emit(.failed(product: package.productIdentifier, reason: failure.message, resumable: !failure.refused))
        return report
    }

    // MARK: install

    private func install(_ package: CatalogPackage, downloader: Downloader, report: inout FetchProductReport) throws {
        let product = package.productIdentifier
        let receipt = try store.receipt(product)
        report.fromVersion = receipt?.version
        // --repair: any listed file missing or changed sends the full archive, installed over them.
        let repairing = try options.repair && receipt.map { try !intact($0) } ?? false
        if let receipt, let installed = ContentVersion(receipt.version), let newest = ContentVersion(package.version) {
            if installed > newest {
                report.status = .upToDate
                report.message = "\(receipt.version) is installed, newer than the catalog's \(package.version); left as it is"
                emit(.upToDate(product: product, version: receipt.version))
                return
            }
            // A journal left by a kill after the receipt was written: the install of this version completes it
            // (from the download, still on disk then), so the version is not up to date yet.
            let journaled = try store.destination.status(Installer.metadataFolder + "/" + Installer.journalName(product)) != nil
            if installed == newest && receipt.plistSHA256 == package.plistSHA256 && !repairing && !journaled {
                // A run killed after the install but before it removed the archive left it here, and one killed
                // before the install removed its staging folder left that.
                try store.removeDownload(package.sha256)
                // And the deltas to this version: one killed after its receipt left its download too.
                for delta in package.deltas { try store.removeDownload(delta.sha256) }
                try Installer.removeLeftovers(in: options.destination)
                report.status = .upToDate
                emit(.upToDate(product: product, version: receipt.version))
                return
            }
        }
        if !repairing, let receipt, let plist = receipt.plistSHA256, let base = ContentVersion(receipt.version),
            let delta = package.deltas.first(where: { ContentVersion($0.baseVersion) == base && ($0.basePlistSHA256 ?? plist) == plist })
        {
            let path = try download(product, url: delta.url, size: delta.size, sha256: delta.sha256, downloader: downloader, report: &report)
            do {
                try place(path, sha256: delta.sha256, package: package, method: .delta, force: false, report: &report)
                return
            } catch let refusal as ProductFailure where refusal.refused {
                // The delta is the catalog's, but DIR is not its base any more (a file changed or went missing).
                try? store.removeDownload(delta.sha256)
                report.message = "the delta from \(delta.baseVersion) was refused (\(refusal.message)); installed the full archive instead"
                emit(.fallingBack(product: product, reason: refusal.message))
            }
        }
        let path = try download(product, url: package.url, size: package.size, sha256: package.sha256, downloader: downloader, report: &report)
        // Fetch keeps DIR at the catalog's content: files this product installed that changed in DIR are replaced
        // by an upgrade, through a delta's fallback or not (the report names them); files hcpack did not install
        // stay refused.
        try place(
            path, sha256: package.sha256, package: package, method: .full, force: repairing, replaceChanged: receipt != nil,
            report: &report)
        if repairing { report.message = "repaired: files missing or changed since the install were restored" }
    }

    /// Whether every file the receipt lists is in DIR with its recorded size and SHA-256.
    private func intact(_ receipt: InstallReceipt) throws(HCPackError) -> Bool {
        for file in receipt.files {
            let parts = file.path.split(separator: "/")
            guard let name = parts.last, let folder = try store.destination.openDirectories(Array(parts.dropLast())),
                let record = try folder.digest(String(name)), record == file.record
            else { return false }
        }
        return true
    }

    /// Downloads one file of the catalog into the bookkeeping folder, after checking there is room for it and for
    /// its install.
    private func download(
        _ product: String, url: String, size: Int64, sha256: String, downloader: Downloader, report: inout FetchProductReport
    ) throws -> String {
        guard size <= options.largestDownload else {
            throw ProductFailure(
                message: "\(url) is \(size) bytes in the catalog, more than the \(options.largestDownload) a download may have with a content limit of \(options.verify.maxSize) bytes; nothing was downloaded, raise --max-size to fetch it",
                refused: true)
        }
        let path = store.downloadPath(sha256)
        let onDisk = min(size, try FileSystem.status(path)?.size ?? 0)
        // The rest of the download, plus as much again to stage the install (the content may need more when
        // compressed: the installer then stops on a full disk with DIR as it was).
        let needed = (size - onDisk).addingSaturated(size)  // a catalog's size may be near 2^63
        let available = try FileSystem.availableBytes(options.destination)
        if available < needed {
            throw HCPackError(
                .diskFull,
                "\(options.destination) has \(available) bytes free; \(product) needs \(needed) (\(size - onDisk) to download \(url), \(size) to install); free some space and run again",
                path: options.destination)
        }
        let file = Self.fileName(url)
        do {
            let stats = try downloader.download(
                DownloadTarget(urls: Fetcher.mirrored(url, options), size: size, sha256: sha256), store: store
            ) { bytes, total in
                self.emit(.downloading(product: product, file: file, bytes: bytes, total: total))
            }
            report.downloadedBytes += stats.downloaded
            report.resumedBytes += stats.resumed
        } catch let stop as DownloadStop {
            report.downloadedBytes += stop.stats.downloaded
            report.resumedBytes += stop.stats.resumed
            throw ProductFailure(message: stop.failure.message, refused: stop.failure.kind == .refused)
        }
        emit(.verifying(product: product, file: file))
        return path
    }

    /// Installs a verified download through the installer's public entry point.
    private func place(
        _ path: String, sha256: String, package: CatalogPackage, method: FetchMethod, force: Bool, replaceChanged: Bool = false,
        report: inout FetchProductReport
    ) throws {
        let product = package.productIdentifier
        emit(.installing(product: product, version: package.version, method: method))
        var install = InstallOptions(
            destination: options.destination, expectedProductIdentifier: product, expectedVersion: package.version, force: force,
            wait: true, verify: options.verify)
        install.installAll = false
        install.replaceChangedInstalledFiles = replaceChanged
        // In the receipt, written last by the installer: DIR never says a version came from a catalog it did not.
        install.catalog = CatalogProvenance(serial: accepted.catalog.serial, signers: accepted.signers)
        let attempt: Result<InstallOutcome, HCPackError> = installing.withLock { _ in
            do throws(HCPackError) {
                return .success(try Installer.install(path, options: install))
            } catch {
                return .failure(error)
            }
        }
        let outcome: InstallOutcome
        switch attempt {
        case .success(let value): outcome = value
        case .failure(let error):
            guard error.code == .invalidPackage else { throw error }
            // DIR refused it (a changed file in the way, a delta's base gone): the bytes are the catalog's.
            throw ProductFailure(
                message: error.message + (method == .full && !force ? " (fetch --repair restores files changed in DIR)" : ""), refused: true)
        }
        switch outcome {
        case .rejected(let verification):
            let first = verification.problems.problems.first { $0.severity == .error }
            throw ProductFailure(
                message: "\(package.url) matches the catalog but is not installable: \(first.map { "[\($0.rule.rawValue)] \($0.path.isEmpty ? "" : $0.path + ": ")\($0.message)" } ?? "refused")",
                refused: true)
        case .completed(let result):
            try store.removeDownload(sha256)
            if !result.replacedChanged.isEmpty {
                let names = result.replacedChanged.prefix(5).map(PackagePath.printable).joined(separator: ", ")
                let more = result.replacedChanged.count > 5 ? " and \(result.replacedChanged.count - 5) more" : ""
                let replaced = "replaced \(result.replacedChanged.count) changed file(s) this product installed: \(names)\(more)"
                report.message = report.message.map { $0 + "; " + replaced } ?? replaced
            }
            report.method = method
            report.status = .installed
            emit(.installed(product: product, version: result.version, method: method))
        }
    }

    /// The last path component of a URL, for names in events and `--check`'s folder.
    static func fileName(_ url: String) -> String {
        let path = url.split(separator: "?", maxSplits: 1).first ?? ""
        return String(path.split(separator: "/").last ?? "")
    }

    // MARK: check

    private func check(_ package: CatalogPackage, downloader: Downloader, report: inout FetchProductReport) throws {
        let product = package.productIdentifier
        var files = [(url: package.url, size: package.size, sha256: package.sha256, note: package.signatureURL)]
        files += package.deltas.map { (url: $0.url, size: $0.size, sha256: $0.sha256, note: nil) }
        for file in files {
            let name = Self.fileName(file.url)
            guard !name.isEmpty, name != ".", name != "..", !name.hasPrefix(".") else {
                throw ProductFailure(message: "\(file.url) has no usable file name to keep in \(options.destination)", refused: true)
            }
            let path = try download(product, url: file.url, size: file.size, sha256: file.sha256, downloader: downloader, report: &report)
            _ = path
            try store.folder.rename(FetchStore.downloadName(file.sha256), to: store.destination, name)
            try store.recordValidator(nil, url: file.url, for: file.sha256)
            let kept = options.destination + "/" + name
            var verification: VerificationReport
            if let noteURL = file.note {
                let bytes: [UInt8]
                do {
                    bytes = try downloader.fetchSmall(Fetcher.mirrored(noteURL, options), limit: SignedNote.maxBytes)
                } catch {
                    throw ProductFailure(message: error.failure.message, refused: error.failure.kind == .refused)
                }
                try store.destination.writeAtomically(name + ".hcsig", bytes)
                verification = try Verifier.verify(kept, options: options.verify, signature: SignaturePolicy(trustedKeys: options.trustedKeys, now: options.now)).report
            } else {
                verification = try Verifier.verify(kept, options: options.verify)
            }
            guard verification.isValid() else {
                let first = verification.problems.problems.first { $0.severity == .error }
                throw ProductFailure(
                    message: "\(file.url) matches the catalog's SHA-256 but breaks the package rules: \(first.map { "[\($0.rule.rawValue)] \($0.message)" } ?? "invalid"); run hcpack verify \(kept)",
                    refused: true)
            }
        }
        report.status = .checked
        emit(.checked(product: product, files: files.count))
    }
}
