import Foundation
import HostedContent
import Testing

/// Receipts and journals are written without JSONEncoder; these pin the bytes to what JSONEncoder writes
/// (receipts written by earlier versions compare equal) and check that the decoder reads them back.
@Suite("Install receipt encoding")
struct InstallReceiptTests {
    /// What receipts were before: JSONEncoder, pretty, sorted keys, slashes unescaped, then a newline.
    static func reference<T: Encodable>(_ value: T) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value)) + [0x0a]
    }

    /// Every ASCII character (controls, quote, backslash, slash, DEL), then non-ASCII: accents in both
    /// normalizations, a combining mark alone, line and paragraph separators, a BOM, an emoji.
    static let awkward: String = {
        var text = ""
        for value in 0..<0x80 { text.unicodeScalars.append(Unicode.Scalar(UInt8(value))) }
        return text + "/é/e\u{301}/\u{301}/\u{2028}\u{2029}/\u{FEFF}/😀/日本語.json"
    }()

    static let paths: [String] = [
        "plain/file.json", awkward, "quote\"in/name", "back\\slash", "tab\there", "new\nline", "cr\rlf\n", "nul\u{0}x",
        "del\u{7f}", "", "/", "a b/c  d",
    ]

    @Test("A receipt is byte for byte what JSONEncoder wrote, and decodes to the same value")
    func receiptMatchesJSONEncoder() throws {
        let files = Self.paths.enumerated().map { index, path in
            InstalledFile(path: path, size: Int64(index) * 1_000_003, sha256: String(repeating: "0f", count: 32))
        }
        let receipt = InstallReceipt(productIdentifier: "com.example.levels", version: "1.0", files: files)
        let bytes = receipt.encoded()
        #expect(bytes == (try Self.reference(receipt)))
        #expect(InstallReceipt.decode(bytes) == receipt)
    }

    @Test("A receipt with the catalog fetch installed it from is what JSONEncoder wrote, and decodes to it", arguments: [0, 1, 2])
    func receiptWithCatalog(signers: Int) throws {
        let catalog = CatalogProvenance(
            serial: 9_223_372_036_854_775_807,
            signers: (0..<signers).map { NoteSigner(name: Self.awkward + "\($0)", keyHash: String(format: "%08x", $0)) })
        let receipt = InstallReceipt(
            productIdentifier: "com.example.levels", version: "1.1", files: [InstalledFile(path: "a", size: 1, sha256: "00")],
            signers: [NoteSigner(name: "example.com/release", keyHash: "1c2a73fa")], plistSHA256: "ab", catalog: catalog)
        let bytes = receipt.encoded()
        #expect(bytes == (try Self.reference(receipt)))
        #expect(InstallReceipt.decode(bytes) == receipt)
    }

    @Test("A journal is byte for byte what JSONEncoder wrote, and decodes to the same value")
    func journalMatchesJSONEncoder() throws {
        let files = Self.paths.map { InstalledFile(path: $0, size: Int64.max, sha256: "") }
            + [InstalledFile(path: "negative", size: -1, sha256: "\"\\")]
        let journal = InstallJournal(productIdentifier: "p\"q\\r/s", version: "1.0\n\u{1}é", files: files)
        let bytes = journal.encoded()
        #expect(bytes == (try Self.reference(journal)))
        #expect(InstallJournal.decode(bytes) == journal)
    }

    @Test("A receipt with no files is what JSONEncoder wrote", arguments: [0, 1])
    func emptyAndSingle(count: Int) throws {
        let files = (0..<count).map { InstalledFile(path: "f\($0)", size: 0, sha256: "") }
        let receipt = InstallReceipt(productIdentifier: "com.example.empty", version: "2", files: files)
        #expect(receipt.encoded() == (try Self.reference(receipt)))
        #expect(InstallReceipt.decode(receipt.encoded()) == receipt)
    }
}
