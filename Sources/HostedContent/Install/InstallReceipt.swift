import Foundation
import Digest

/// One installed file: its path relative to DEST, size and SHA-256.
public struct InstalledFile: Sendable, Equatable, Codable {
    /// Path relative to DEST (the same as relative to the package's Contents/).
    public var path: String
    /// Size in bytes.
    public var size: Int64
    /// Lowercase hexadecimal SHA-256.
    public var sha256: String

    /// A record of one file.
    public init(path: String, size: Int64, sha256: String) {
        self.path = path
        self.size = size
        self.sha256 = sha256
    }

    /// The size and digest alone.
    public var record: FileRecord { FileRecord(size: size, sha256: sha256) }
}

/// Which signed catalog an installed version came from (`hcpack fetch`): its serial and the trusted keys whose
/// signature on its note verified. `hcpack install` of an archive leaves it out.
public struct CatalogProvenance: Sendable, Equatable, Codable {
    /// The catalog's serial.
    public var serial: Int64
    /// The trusted keys that signed the catalog's note.
    public var signers: [NoteSigner]

    public init(serial: Int64, signers: [NoteSigner]) {
        self.serial = serial
        self.signers = signers
    }
}

/// What DEST holds for one product: `DEST/.hcpack/receipts/<product-id>.json` (docs/install.md).
///
/// Deterministic (no timestamps, sorted keys and files), so installing the same package twice gives the same bytes.
public struct InstallReceipt: Sendable, Equatable, Codable {
    /// The receipt format; bumped if fields ever change meaning.
    public static let currentFormat = 1

    /// `currentFormat` when written by this hcpack.
    public var format: Int
    /// The product the files belong to.
    public var productIdentifier: String
    /// The installed ContentVersion, as written in the package.
    public var version: String
    /// Installed files, sorted by path.
    public var files: [InstalledFile]
    /// The keys whose signature vouched for this version (install --trusted-key); absent for an unsigned install.
    public var signers: [NoteSigner]?
    /// SHA-256 of the installed version's ContentInfo.plist (of the full package, also when installed through
    /// a delta): a delta applies only on top of the plist it was made from. Absent in receipts of older hcpack.
    public var plistSHA256: String?
    /// The catalog `hcpack fetch` installed this version from; absent for `hcpack install`.
    public var catalog: CatalogProvenance?

    /// A receipt in the current format; `files` are sorted by path.
    public init(
        productIdentifier: String, version: String, files: [InstalledFile], signers: [NoteSigner] = [], plistSHA256: String? = nil,
        catalog: CatalogProvenance? = nil
    ) {
        self.catalog = catalog
        self.format = Self.currentFormat
        self.productIdentifier = productIdentifier
        self.version = version
        self.files = files.sorted { $0.path < $1.path }
        self.signers = signers.isEmpty ? nil : signers
        self.plistSHA256 = plistSHA256
    }

    /// Files by path.
    public var recordsByPath: [String: FileRecord] {
        Dictionary(files.map { ($0.path, $0.record) }, uniquingKeysWith: { first, _ in first })
    }

    /// Pretty, key-sorted JSON followed by a newline.
    public func encoded() -> [UInt8] {
        JSONCoding.encode(
            format: format, productIdentifier: productIdentifier, version: version, files: files, signers: signers,
            plistSHA256: plistSHA256, catalog: catalog)
    }

    /// `encoded()`, handed over in chunks of about 64 KiB rather than as one buffer (5 MB for 26,000 files).
    func write<Failure: Error>(chunks: ([UInt8]) throws(Failure) -> Void) throws(Failure) {
        try JSONCoding.write(
            format: format, productIdentifier: productIdentifier, version: version, files: files, signers: signers,
            plistSHA256: plistSHA256, catalog: catalog, chunks: chunks)
    }

    /// Parses a receipt; nil when the bytes are not one. Install reads receipts through `InstallRecords`, which
    /// also checks every path and refuses a damaged receipt unless `--force` sets it aside.
    public static func decode(_ bytes: [UInt8]) -> InstallReceipt? {
        guard let receipt = try? JSONDecoder().decode(InstallReceipt.self, from: Data(bytes)),
            receipt.format == currentFormat
        else { return nil }
        return receipt
    }
}

/// The intent of an install in progress: `DEST/.hcpack/journal-<product-id>.json`, written and fsync'd before
/// the first rename into DEST and removed once the receipt is written.
///
/// After a crash, a file at a journal path whose size and digest match the journal was put there by hcpack,
/// so the next install may replace or remove it instead of refusing it as a user file.
public struct InstallJournal: Sendable, Equatable, Codable {
    /// The receipt format number.
    public var format: Int
    /// The product being installed.
    public var productIdentifier: String
    /// The version being installed.
    public var version: String
    /// Files that may be at their final paths after a crash (about to be placed, or placed by an earlier
    /// interrupted install), sorted by path.
    public var files: [InstalledFile]

    /// A journal in the current format; `files` are sorted by path.
    public init(productIdentifier: String, version: String, files: [InstalledFile]) {
        self.format = InstallReceipt.currentFormat
        self.productIdentifier = productIdentifier
        self.version = version
        self.files = files.sorted { $0.path < $1.path }
    }

    /// Pretty, key-sorted JSON followed by a newline.
    public func encoded() -> [UInt8] {
        JSONCoding.encode(format: format, productIdentifier: productIdentifier, version: version, files: files)
    }

    /// `encoded()`, handed over in chunks of about 64 KiB rather than as one buffer (5 MB for 26,000 files).
    func write<Failure: Error>(chunks: ([UInt8]) throws(Failure) -> Void) throws(Failure) {
        try JSONCoding.write(format: format, productIdentifier: productIdentifier, version: version, files: files, chunks: chunks)
    }

    /// Parses a journal; nil when the bytes are not one.
    public static func decode(_ bytes: [UInt8]) -> InstallJournal? {
        guard let journal = try? JSONDecoder().decode(InstallJournal.self, from: Data(bytes)),
            journal.format == InstallReceipt.currentFormat
        else { return nil }
        return journal
    }
}

/// Writes receipts and journals.
///
/// The bytes are exactly those of `JSONEncoder` with `[.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]`
/// (what earlier versions wrote), produced straight into one buffer: JSONEncoder's intermediate tree took
/// 900 bytes a file, 23 MB for 26,000 files, while the output is about 180 bytes a file.
enum JSONCoding {
    static func encode(
        format: Int, productIdentifier: String, version: String, files: [InstalledFile], signers: [NoteSigner]? = nil,
        plistSHA256: String? = nil, catalog: CatalogProvenance? = nil
    ) -> [UInt8] {
        var whole: [UInt8] = []
        whole.reserveCapacity(files.reduce(160 + productIdentifier.utf8.count + version.utf8.count) {
            $0 + 96 + $1.path.utf8.count + $1.sha256.utf8.count
        })
        write(
            format: format, productIdentifier: productIdentifier, version: version, files: files, signers: signers,
            plistSHA256: plistSHA256, catalog: catalog
        ) { whole += $0 }
        return whole
    }

    /// Size at which `write` hands a chunk over.
    static let chunkSize = 64 << 10

    /// The bytes of `encode`, handed to `chunks` about `chunkSize` at a time.
    static func write<Failure: Error>(
        format: Int, productIdentifier: String, version: String, files: [InstalledFile], signers: [NoteSigner]? = nil,
        plistSHA256: String? = nil, catalog: CatalogProvenance? = nil, chunks: ([UInt8]) throws(Failure) -> Void
    ) throws(Failure) {
        var out: [UInt8] = []
        out.reserveCapacity(chunkSize + 4096)
        out.append(contentsOf: "{\n".utf8)
        if let catalog {
            out.append(contentsOf: "  \"catalog\" : {\n    \"serial\" : \(catalog.serial),\n    \"signers\" : [".utf8)
            out.append(contentsOf: (catalog.signers.isEmpty ? "\n\n    ]\n  },\n" : "\n").utf8)
            for (index, signer) in catalog.signers.enumerated() {
                out.append(contentsOf: "      {\n        \"keyHash\" : ".utf8)
                appendString(signer.keyHash, to: &out)
                out.append(contentsOf: ",\n        \"name\" : ".utf8)
                appendString(signer.name, to: &out)
                out.append(contentsOf: index == catalog.signers.count - 1 ? "\n      }\n    ]\n  },\n".utf8 : "\n      },\n".utf8)
            }
        }
        out.append(contentsOf: "  \"files\" : [\n".utf8)
        if files.isEmpty { out.append(0x0a) }
        for (index, file) in files.enumerated() {
            if out.count >= chunkSize {
                try chunks(out)
                out.removeAll(keepingCapacity: true)
            }
            out.append(contentsOf: "    {\n      \"path\" : ".utf8)
            appendString(file.path, to: &out)
            out.append(contentsOf: ",\n      \"sha256\" : ".utf8)
            appendString(file.sha256, to: &out)
            out.append(contentsOf: ",\n      \"size\" : ".utf8)
            out.append(contentsOf: String(file.size).utf8)
            out.append(contentsOf: index == files.count - 1 ? "\n    }\n".utf8 : "\n    },\n".utf8)
        }
        out.append(contentsOf: "  ],\n  \"format\" : ".utf8)
        out.append(contentsOf: String(format).utf8)
        if let plistSHA256 {
            out.append(contentsOf: ",\n  \"plistSHA256\" : ".utf8)
            appendString(plistSHA256, to: &out)
        }
        out.append(contentsOf: ",\n  \"productIdentifier\" : ".utf8)
        appendString(productIdentifier, to: &out)
        if let signers, !signers.isEmpty {
            out.append(contentsOf: ",\n  \"signers\" : [\n".utf8)
            for (index, signer) in signers.enumerated() {
                out.append(contentsOf: "    {\n      \"keyHash\" : ".utf8)
                appendString(signer.keyHash, to: &out)
                out.append(contentsOf: ",\n      \"name\" : ".utf8)
                appendString(signer.name, to: &out)
                out.append(contentsOf: index == signers.count - 1 ? "\n    }\n  ]".utf8 : "\n    },\n".utf8)
            }
        }
        out.append(contentsOf: ",\n  \"version\" : ".utf8)
        appendString(version, to: &out)
        out.append(contentsOf: "\n}\n".utf8)
        try chunks(out)
    }

    /// A JSON string literal as JSONEncoder writes it: `"` and `\` escaped, control characters as `\b \t \n
    /// \f \r` or `\u00xx`, everything else (`/`, DEL, non-ASCII) as its UTF-8 bytes.
    static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            // Most paths need no escape: copied at once (a byte at a time was most of writing a receipt).
            if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                out.append(contentsOf: bytes)
            } else {
                for byte in bytes { appendEscaped(byte, to: &out) }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func appendEscaped(_ byte: UInt8, to out: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), byte]
        case 0x08: out += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
        case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
        case 0x0a: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
        case 0x0c: out += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
        case 0x0d: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
        case 0..<0x20:
            out += Array("\\u00".utf8) + Array([byte].hexString.utf8)
        default: out.append(byte)
        }
    }
}
