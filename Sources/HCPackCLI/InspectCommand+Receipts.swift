import HostedContent

/// `inspect DEST`: what hcpack installed into a folder, from its receipts, and which keys vouched for it.
extension InspectCommand {
    static func text(receipts: [InstallReceipt], label: String) -> String {
        var text = "\(label): an install destination with \(ReportRendering.plural(receipts.count, "product"))\n"
        for receipt in receipts {
            let bytes = receipt.files.saturatingSum(\.size)
            // Receipts are DEST's records, untrusted: their strings reach the terminal with control characters escaped.
            text +=
                "  \(PackagePath.printable(receipt.productIdentifier)) \(PackagePath.printable(receipt.version)): "
                + "\(ReportRendering.plural(receipt.files.count, "file")), \(bytes) bytes\n"
            let signers = receipt.signers ?? []
            text +=
                signers.isEmpty
                ? "    Signed by:  (installed without --trusted-key)\n"
                : "    Signed by:  " + Self.printable(signers) + "\n"
            if let catalog = receipt.catalog {
                text += "    Catalog:    serial \(catalog.serial), signed by " + Self.printable(catalog.signers) + " (hcpack fetch)\n"
            }
        }
        return text
    }

    private static func printable(_ signers: [NoteSigner]) -> String {
        signers.map { "\(PackagePath.printable($0.name)) (\(PackagePath.printable($0.keyHash)))" }.joined(separator: ", ")
    }

    static func json(receipts: [InstallReceipt], path: String) -> JSONValue {
        .object([
            ("path", .string(path)),
            (
                "receipts",
                .array(
                    receipts.map { receipt in
                        .object([
                            ("productIdentifier", .string(receipt.productIdentifier)), ("version", .string(receipt.version)),
                            ("files", .number(Int64(receipt.files.count))),
                            ("bytes", .number(receipt.files.saturatingSum(\.size))),
                            ("signers", .signers(receipt.signers ?? [])),
                            (
                                "catalog",
                                receipt.catalog.map { catalog in
                                    .object([
                                        ("serial", .number(catalog.serial)), ("signers", .signers(catalog.signers)),
                                    ])
                                } ?? .null
                            ),
                        ])
                    })
            ),
        ])
    }
}
