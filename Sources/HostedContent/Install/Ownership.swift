/// Who owns the files of DEST, across products: a path is owned by every product whose receipt lists it.
///
/// The one place install decides what it may do to a path another product owns: it never writes one with
/// other bytes than that product's receipt records (with or without --force), and never removes one as stale.
/// Where the bytes are identical both products own the file, and it stays until neither lists it.
struct Ownership {
    /// Another product's record of one path.
    struct Owner {
        var productIdentifier: String
        var record: FileRecord
    }

    /// Other products' records, by path.
    private(set) var owners: [String: [Owner]] = [:]

    /// The receipts in `receipts` of every product but `productIdentifier`.
    /// - Throws: `InstallRecords.unusable` for another product's unusable receipt, with or without --force:
    ///   setting it aside would let this install overwrite files that product owns.
    static func load(excluding productIdentifier: String, in receipts: DirectoryHandle?, limits: ReadLimits)
        throws(HCPackError) -> Ownership
    {
        var ownership = Ownership()
        guard let receipts else { return ownership }
        let own = Installer.receiptName(productIdentifier)
        for name in try receipts.list() where name.hasSuffix(".json") && name != own {
            guard let receipt = try InstallRecords.receipt(named: name, in: receipts, limits: limits) else { continue }
            for file in receipt.files {
                ownership.owners[file.path, default: []].append(
                    Owner(productIdentifier: receipt.productIdentifier, record: file.record))
            }
        }
        return ownership
    }

    /// The products other than the one installing whose receipts list `path`.
    func otherOwners(of path: String) -> [String] { owners[path]?.map(\.productIdentifier) ?? [] }

    /// Why `productIdentifier` may not install `file`: another product owns its path with other bytes. Nil
    /// when no other product lists it, or every one that does records the same bytes (both then own it).
    func conflict(installing file: InstalledFile, productIdentifier: String, destination: String) -> String? {
        guard let others = owners[file.path] else { return nil }
        let differing = others.filter { $0.record != file.record }.map { "'\($0.productIdentifier)'" }
        guard !differing.isEmpty else { return nil }
        return
            "\(destination)/\(file.path) belongs to \(differing.joined(separator: ", ")), whose receipt records other bytes than '\(productIdentifier)' installs there (refused with or without --force); rename the file in one of the packages, or remove the other product first"
    }
}
