/// Reads magic numbers: which one compression filter and which one archive format an input gets, and a
/// human name for the formats we refuse, so errors can say what the input looks like.
///
/// `ArchiveReader` configures libarchive with exactly what `identify` finds (`archive_read_append_filter`,
/// `archive_read_set_format`) instead of letting libarchive's bidders guess: a stream is decompressed once,
/// and no reader hcpack does not use ever sees the input.
enum FormatSniffer {
    /// How many leading bytes are looked at (the ISO 9660 descriptors start at 32 KiB).
    static let prefixLength = 64 * 1024

    /// A compression layer hcpack removes (tar only: a zip compresses its entries itself).
    enum Compression: String, Sendable {
        case gzip, bzip2, xz, zstd
    }

    /// An archive format hcpack reads.
    enum Format: Sendable {
        case zip, tar
    }

    /// The compression whose magic number `prefix` starts with, if any.
    static func compression(_ prefix: ArraySlice<UInt8>) -> Compression? {
        if prefix.starts(with: [0x1F, 0x8B]) { return .gzip }
        if prefix.starts(with: Array("BZh".utf8)) { return .bzip2 }
        if prefix.starts(with: [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00]) { return .xz }
        if prefix.starts(with: [0x28, 0xB5, 0x2F, 0xFD]) { return .zstd }
        return nil
    }

    /// A zip: a local file header, or the end record of an empty zip.
    static func isZip(_ prefix: ArraySlice<UInt8>) -> Bool {
        prefix.starts(with: [0x50, 0x4B, 0x03, 0x04]) || prefix.starts(with: [0x50, 0x4B, 0x05, 0x06])
    }

    static func isXar(_ prefix: ArraySlice<UInt8>) -> Bool { prefix.starts(with: Array("xar!".utf8)) }

    /// A tar: the first 512-byte header has "ustar" at 257, or a valid header checksum (old v7 tar), or is
    /// all zeros (the end marker of an empty archive).
    static func isTar(_ prefix: ArraySlice<UInt8>) -> Bool {
        guard prefix.count >= 512 else { return false }
        let header = prefix.prefix(512)
        let start = header.startIndex
        if header[(start + 257)..<(start + 262)].elementsEqual("ustar".utf8) { return true }
        if header.allSatisfy({ $0 == 0 }) { return true }
        // Checksum: octal digits at 148..<156; the sum of the header's bytes with that field read as spaces.
        var stored = 0
        var digits = 0
        for byte in header[(start + 148)..<(start + 156)] {
            if byte == 0x20 && digits == 0 { continue }
            guard (0x30...0x37).contains(byte) else { break }
            stored = stored * 8 + Int(byte - 0x30)
            digits += 1
        }
        guard digits > 0 else { return false }
        var unsigned = 0
        var signed = 0
        for (offset, byte) in header.enumerated() {
            let value = (148..<156).contains(offset) ? 0x20 : byte
            unsigned += Int(value)
            signed += Int(Int8(bitPattern: value))
        }
        return stored == unsigned || stored == signed
    }

    static func isISO9660(_ prefix: ArraySlice<UInt8>) -> Bool {
        [0x8001, 0x8801, 0x9001].contains { offset in
            prefix.count >= offset + 5
                && prefix[(prefix.startIndex + offset)..<(prefix.startIndex + offset + 5)].elementsEqual("CD001".utf8)
        }
    }

    /// A human name for a format we do not read, or nil when nothing is recognized.
    static func describe(_ prefix: ArraySlice<UInt8>) -> String? {
        if prefix.isEmpty { return "an empty file" }
        func has(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            prefix.count >= offset + magic.count
                && prefix[(prefix.startIndex + offset)..<(prefix.startIndex + offset + magic.count)].elementsEqual(magic)
        }
        let ascii = { (text: String) in Array(text.utf8) }
        if has([0x52, 0x61, 0x72, 0x21, 0x1A, 0x07]) { return "a RAR archive" }
        if has([0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C]) { return "a 7-Zip archive" }
        if isISO9660(prefix) { return "an ISO 9660 image" }
        if has(ascii("070707")) || has(ascii("070701")) || has(ascii("070702")) || has([0xC7, 0x71])
            || has([0x71, 0xC7])
        {
            return "a cpio archive"
        }
        if has(ascii("MSCF")) { return "a Microsoft Cabinet archive" }
        if has(ascii("!<arch>\n")) { return "an ar archive" }
        if has(ascii("-lh"), at: 2) { return "an LHA archive" }
        if isXar(prefix) { return "a xar archive" }
        if let compression = compression(prefix) { return "\(compression.rawValue)-compressed data that is not a tar archive" }
        if has([0x50, 0x4B]) { return "a damaged zip archive" }
        return nil
    }
}
