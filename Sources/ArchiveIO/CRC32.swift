/// CRC-32 as zip uses it (IEEE 802.3, reflected, polynomial 0xEDB88320), for the one entry hcpack rewrites
/// after libarchive wrote it (`ZipEntryRewrite`). A table a byte: the plist is at most megabytes.
public enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 != 0 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    /// The checksum of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        update(0, with: bytes)
    }

    /// The checksum of the bytes `crc` covers followed by `bytes`.
    public static func update(_ crc: UInt32, with bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBufferPointer { buffer in
            table.withUnsafeBufferPointer { table in
                var crc = ~crc
                for byte in buffer { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
                return ~crc
            }
        }
    }
}
