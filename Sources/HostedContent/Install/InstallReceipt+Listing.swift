/// The receipts of an install destination, for `inspect DEST`.
extension InstallReceipt {
    /// Every readable receipt in `DEST/.hcpack/receipts/`, sorted by product; nil when `destination` is not a
    /// folder hcpack installed into (no receipts folder) or is a package folder (has ContentInfo.plist).
    public static func installed(in destination: String) throws(HCPackError) -> [InstallReceipt]? {
        guard try FileSystem.status(destination)?.kind == .directory,
            try FileSystem.status(destination + "/" + ContentInfo.fileName) == nil
        else { return nil }
        let folder = try DirectoryHandle.open(destination)
        guard let metadata = try folder.openDirectory(Installer.metadataFolder),
            let receipts = try metadata.openDirectory(Installer.receiptsFolder)
        else { return nil }
        var result: [InstallReceipt] = []
        for name in try receipts.list().sorted() where name.hasSuffix(".json") {
            // One that is not a record hcpack wrote (too big, a path outside the rules) is left out.
            if let receipt = try? InstallRecords.receipt(named: name, in: receipts, limits: ReadLimits()) { result.append(receipt) }
        }
        return result
    }
}
