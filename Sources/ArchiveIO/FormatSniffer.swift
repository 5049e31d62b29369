/// Names formats we refuse, from their magic numbers, so errors can say what the input looks like.
///
/// Used only after libarchive has declined the input (or, for ISO 9660, found nothing in it): the tar
/// reader takes the all-zero system area of an ISO image for an end-of-archive marker and reports an empty
/// archive. Sniffing never decides that an input is acceptable.
enum FormatSniffer {
    /// How many leading bytes `describe` looks at (the ISO 9660 descriptors start at 32 KiB).
    static let prefixLength = 40 * 1024

    /// A human name for a format we do not read, or nil when nothing is recognized.
    static func describe(_ prefix: [UInt8]) -> String? {
        if prefix.isEmpty { return "an empty file" }
        func has(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            prefix.count >= offset + magic.count && Array(prefix[offset..<offset + magic.count]) == magic
        }
        let ascii = { (text: String) in Array(text.utf8) }
        if has([0x52, 0x61, 0x72, 0x21, 0x1A, 0x07]) { return "a RAR archive" }
        if has([0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C]) { return "a 7-Zip archive" }
        for offset in [0x8001, 0x8801, 0x9001] where has(ascii("CD001"), at: offset) {
            return "an ISO 9660 image"
        }
        if has(ascii("070707")) || has(ascii("070701")) || has(ascii("070702")) || has([0xC7, 0x71])
            || has([0x71, 0xC7])
        {
            return "a cpio archive"
        }
        if has(ascii("MSCF")) { return "a Microsoft Cabinet archive" }
        if has(ascii("!<arch>\n")) { return "an ar archive" }
        if has(ascii("-lh"), at: 2) { return "an LHA archive" }
        if has(ascii("xar!")) { return "a damaged xar archive" }
        if has([0x1F, 0x8B]) { return "gzip-compressed data that is not a tar archive" }
        if has(ascii("BZh")) { return "bzip2-compressed data that is not a tar archive" }
        if has([0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00]) { return "xz-compressed data that is not a tar archive" }
        if has([0x28, 0xB5, 0x2F, 0xFD]) { return "zstd-compressed data that is not a tar archive" }
        if has([0x50, 0x4B]) { return "a damaged zip archive" }
        return nil
    }
}
