import Foundation

/// One entry of a `RawZip`: every field settable, and the local header free to disagree with the central
/// record, for the zips that Python's zipfile will not write.
public struct RawZipEntry: Sendable {
    public var name: [UInt8]
    /// The bytes stored as the entry's data (already compressed when `method` is not 0).
    public var data: [UInt8]
    public var method: UInt16 = 0
    public var flags: UInt16 = 0
    /// CRC-32 and size of the uncompressed data; by default those of `data`.
    public var crc32: UInt32?
    public var uncompressedSize: UInt32?
    public var externalAttributes: UInt32 = 0o100644 << 16
    public var centralExtra: [UInt8] = []
    public var localExtra: [UInt8] = []
    /// Central fields written in place of the computed ones (0xFFFFFFFF for zip64 tests).
    public var centralCompressedSize: UInt32?
    public var centralUncompressedSize: UInt32?
    /// What the local header says instead of the central record.
    public var localName: [UInt8]?
    public var localMethod: UInt16?
    public var localFlags: UInt16?
    public var localCRC32: UInt32?
    public var localCompressedSize: UInt32?
    public var localUncompressedSize: UInt32?
    /// Writes no local header or data of its own: the central record points at that of entry `sharesLocalOf`.
    public var sharesLocalOf: Int?
    /// Writes no local header or data of its own: the central record points at the start of the data of
    /// entry `pointsIntoDataOf` (which holds this entry's `localRecord()`, a header hidden in another's data).
    public var pointsIntoDataOf: Int?
    /// Bytes written after the data, outside it: a data descriptor (with `flags` bit 3), or a gap.
    public var afterData: [UInt8] = []

    public init(_ name: String, _ data: [UInt8]) {
        self.name = Array(name.utf8)
        self.data = data
    }

    public init(_ name: String, _ text: String) { self.init(name, Array(text.utf8)) }

    public init(rawName: [UInt8], _ data: [UInt8]) {
        self.name = rawName
        self.data = data
    }

    /// The local header and data as `RawZip` writes them.
    public func localRecord() -> [UInt8] {
        let crc = crc32 ?? RawZip.crc32(data)
        var out = le32(0x0403_4b50) + le16(20) + le16(localFlags ?? flags) + le16(localMethod ?? method) + le16(0) + le16(0x21)
        out +=
            le32(localCRC32 ?? crc) + le32(localCompressedSize ?? UInt32(data.count))
            + le32(localUncompressedSize ?? uncompressedSize ?? UInt32(data.count))
        let localName = self.localName ?? name
        return out + le16(UInt16(localName.count)) + le16(UInt16(localExtra.count)) + localName + localExtra + data
    }
}

/// A byte-level zip writer for tests: local headers, central directory, end record, and on request a zip64
/// end record and locator.
public struct RawZip: Sendable {
    public var entries: [RawZipEntry]
    /// Writes a zip64 end record and locator; `saturateEnd` also writes 0xFFFF/0xFFFFFFFF in the 32-bit end
    /// record, and `zip64EntryCountDelta` makes the zip64 count disagree.
    public var zip64End = false
    public var saturateEnd = false
    public var zip64EntryCountDelta = 0

    public init(_ entries: [RawZipEntry]) { self.entries = entries }

    /// A package (ContentInfo.plist listing `a.json`, Contents/a.json) followed by `extra` entries.
    public static func package(_ extra: [RawZipEntry], listing: [String] = ["a.json"]) -> RawZip {
        let files = listing.map { "<string>\($0)</string>" }.joined()
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>IAPProductIdentifier</key><string>com.example.rawzip</string>
            <key>ContentVersion</key><string>1.0</string><key>Files</key><array>\(files)</array></dict></plist>

            """
        return RawZip([RawZipEntry("ContentInfo.plist", plist), RawZipEntry("Contents/a.json", "{}")] + extra)
    }

    /// The archive's bytes.
    public func bytes() -> [UInt8] {
        var out: [UInt8] = []
        var offsets: [Int] = []
        var dataStarts: [Int] = []
        for entry in entries {
            if let shared = entry.sharesLocalOf, shared < offsets.count {
                offsets.append(offsets[shared])
                dataStarts.append(dataStarts[shared])
            } else if let host = entry.pointsIntoDataOf, host < dataStarts.count {
                offsets.append(dataStarts[host])
                dataStarts.append(dataStarts[host])
            } else {
                offsets.append(out.count)
                let record = entry.localRecord()
                out += record
                dataStarts.append(out.count - entry.data.count)
                out += entry.afterData
            }
        }
        let centralStart = out.count
        for (index, entry) in entries.enumerated() {
            let crc = entry.crc32 ?? RawZip.crc32(entry.data)
            out += le32(0x0201_4b50) + le16(0x031e) + le16(20) + le16(entry.flags) + le16(entry.method) + le16(0) + le16(0x21)
            out += le32(crc) + le32(entry.centralCompressedSize ?? UInt32(entry.data.count))
            out += le32(entry.centralUncompressedSize ?? entry.uncompressedSize ?? UInt32(entry.data.count))
            out += le16(UInt16(entry.name.count)) + le16(UInt16(entry.centralExtra.count)) + le16(0) + le16(0) + le16(0)
            out += le32(entry.externalAttributes) + le32(UInt32(offsets[index])) + entry.name + entry.centralExtra
        }
        let centralSize = out.count - centralStart
        if zip64End {
            let recordStart = out.count
            let count = UInt64(max(0, entries.count + zip64EntryCountDelta))
            out += le32(0x0606_4b50) + le64(44) + le16(0x031e) + le16(45) + le32(0) + le32(0)
            out += le64(count) + le64(count) + le64(UInt64(centralSize)) + le64(UInt64(centralStart))
            out += le32(0x0706_4b50) + le32(0) + le64(UInt64(recordStart)) + le32(1)
        }
        let count16 = saturateEnd ? 0xffff : UInt16(entries.count)
        out += le32(0x0605_4b50) + le16(0) + le16(0) + le16(count16) + le16(count16)
        out +=
            le32(saturateEnd ? 0xffff_ffff : UInt32(centralSize)) + le32(saturateEnd ? 0xffff_ffff : UInt32(centralStart))
            + le16(0)
        return out
    }

    /// Writes the archive to `path`.
    @discardableResult
    public func write(to path: String) -> String {
        FileManager.default.createFile(atPath: path, contents: Data(bytes()))
        return path
    }

    /// A data descriptor: the signature (unless `signed` is false), CRC-32, then both sizes (8 bytes each when `wide`).
    public static func descriptor(crc32: UInt32, compressed: UInt64, uncompressed: UInt64, signed: Bool = true, wide: Bool = false)
        -> [UInt8]
    {
        let sizes = wide ? le64(compressed) + le64(uncompressed) : le32(UInt32(compressed)) + le32(UInt32(uncompressed))
        return (signed ? le32(0x0807_4b50) : []) + le32(crc32) + sizes
    }

    /// An extra field: ID, size, data.
    public static func extraField(_ id: UInt16, _ data: [UInt8]) -> [UInt8] { le16(id) + le16(UInt16(data.count)) + data }

    /// An Info-ZIP Unicode Path field (0x7075) for a header named `headerName`, naming `unicodeName`.
    public static func unicodePath(headerName: [UInt8], _ unicodeName: String) -> [UInt8] {
        extraField(0x7075, [1] + le32(crc32(headerName)) + Array(unicodeName.utf8))
    }

    /// CRC-32 (IEEE, reflected), bit by bit: test data is small.
    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xffff_ffff
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xedb8_8320 : crc >> 1 }
        }
        return ~crc
    }
}

public func le16(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xff), UInt8(value >> 8)] }
public func le32(_ value: UInt32) -> [UInt8] { le16(UInt16(value & 0xffff)) + le16(UInt16(value >> 16)) }
public func le64(_ value: UInt64) -> [UInt8] { le32(UInt32(value & 0xffff_ffff)) + le32(UInt32(value >> 32)) }
