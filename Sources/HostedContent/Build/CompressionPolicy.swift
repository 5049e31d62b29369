import ArchiveIO
import Foundation  // log2

/// How `hcpack build` chooses each zip entry's compression.
public enum CompressionPolicy: String, Sendable, CaseIterable {
    /// Deflate data that shrinks, store data that does not (already-compressed media): see `choose(head:)`.
    case auto
    /// Store every file as is.
    case store
    /// Deflate every file.
    case deflate

    /// How many leading bytes `auto` looks at.
    public static let sampleLength = 64 << 10
    /// Files smaller than this are stored under `auto`: deflate headers would eat any saving.
    public static let smallFileLimit = 64
    /// Byte entropy (bits per byte) above which a sample counts as incompressible.
    public static let entropyThreshold = 7.5

    /// The compression for a file whose first bytes are `head` (at most `sampleLength` of them are read).
    /// An empty file is stored whatever the policy: there is nothing to deflate.
    public func choose(head: UnsafeRawBufferPointer) -> EntryCompression {
        if head.isEmpty { return .store }
        switch self {
        case .store: return .store
        case .deflate: return .deflate
        case .auto:
            if head.count < Self.smallFileLimit { return .store }
            if Self.compressedFormat(head) != nil { return .store }
            let sample = UnsafeRawBufferPointer(rebasing: head.prefix(Self.sampleLength))
            return Self.entropy(sample) > Self.entropyThreshold ? .store : .deflate
        }
    }

    /// Convenience for tests and callers holding an array.
    public func choose(head: [UInt8]) -> EntryCompression {
        head.withUnsafeBytes { choose(head: $0) }
    }

    /// The name of a compressed format recognised by its magic number, or nil.
    ///
    /// Covers images (PNG, JPEG, GIF, WebP, HEIC/AVIF), audio and video (ISO media: MP4/MOV/M4A, MP3, AAC,
    /// Ogg, FLAC, Matroska/WebM), archives (zip, gzip, xz, zstd, bzip2, 7z, rar), compressed fonts (WOFF, WOFF2) and PDF.
    public static func compressedFormat(_ head: UnsafeRawBufferPointer) -> String? {
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            guard head.count >= offset + magic.count else { return false }
            for (index, byte) in magic.enumerated() where head[offset + index] != byte { return false }
            return true
        }
        func ascii(_ text: String, at offset: Int = 0) -> Bool { starts(Array(text.utf8), at: offset) }

        if starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]) { return "PNG" }
        if starts([0xff, 0xd8, 0xff]) { return "JPEG" }
        if ascii("GIF87a") || ascii("GIF89a") { return "GIF" }
        if ascii("RIFF") && ascii("WEBP", at: 8) { return "WebP" }
        // ISO base media (MP4, MOV, M4A, HEIC, AVIF, 3GP): a box type at offset 4.
        if ascii("ftyp", at: 4) || ascii("moov", at: 4) || ascii("mdat", at: 4) || ascii("wide", at: 4) { return "ISO media" }
        if ascii("ID3") { return "MP3" }
        // MPEG audio frame sync (MP3, AAC/ADTS): 11 set bits. JPEG (FF D8) was matched above.
        if head.count >= 2 && head[0] == 0xff && head[1] & 0xe0 == 0xe0 { return "MPEG audio" }
        if ascii("OggS") { return "Ogg" }
        if ascii("fLaC") { return "FLAC" }
        if starts([0x1a, 0x45, 0xdf, 0xa3]) { return "Matroska" }
        if starts([0x50, 0x4b, 0x03, 0x04]) || starts([0x50, 0x4b, 0x05, 0x06]) { return "zip" }
        if starts([0x1f, 0x8b]) { return "gzip" }
        if starts([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]) { return "xz" }
        if starts([0x28, 0xb5, 0x2f, 0xfd]) { return "zstd" }
        if ascii("BZh") { return "bzip2" }
        if starts([0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c]) { return "7z" }
        if ascii("Rar!") { return "rar" }
        if ascii("wOFF") || ascii("wOF2") { return "WOFF" }
        if ascii("%PDF") { return "PDF" }
        return nil
    }

    /// Shannon entropy of the bytes, in bits per byte (0 for no data, 8 for uniformly random data).
    public static func entropy(_ bytes: UnsafeRawBufferPointer) -> Double {
        guard !bytes.isEmpty else { return 0 }
        var counts = [Int](repeating: 0, count: 256)
        for byte in bytes { counts[Int(byte)] += 1 }
        let total = Double(bytes.count)
        var bits = 0.0
        for count in counts where count > 0 {
            let p = Double(count) / total
            bits -= p * log2(p)
        }
        return bits
    }
}
