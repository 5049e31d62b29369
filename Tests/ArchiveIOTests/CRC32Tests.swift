import ArchiveIO
import Foundation
import Testing

@Suite("CRC-32: the same values as zlib's, whatever the length and however the bytes are split")
struct CRC32Tests {
    /// Lengths around the slicing step (16) and the three-lane threshold (`3 x 4096`), and a large one.
    static let lengths = [0, 1, 15, 16, 17, 255, 12_287, 12_288, 12_289, 12_303, 100_000, (1 << 20) + 3]

    @Test("Random bytes of every length: Python's zlib.crc32 gives the same value")
    func matchesZlib() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        var generator = SystemRandomNumberGenerator()
        var expected: [String] = []
        var actual: [String] = []
        for (index, length) in Self.lengths.enumerated() {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            try dir.write("\(index).bin", bytes)
            actual.append(String(CRC32.checksum(bytes), radix: 16))
        }
        let program = "import sys, zlib\nfor p in sys.argv[1:]: print('%x' % zlib.crc32(open(p, 'rb').read()))"
        let output = try run("python3", ["-c", program] + Self.lengths.indices.map { dir.path("\($0).bin") })
        expected = output.split(separator: "\n").map(String.init)
        #expect(actual == expected)
    }

    @Test("A checksum continued chunk by chunk equals the checksum of the whole, at any split")
    func chunked() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<200_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let whole = CRC32.checksum(bytes)
        for split in [0, 1, 7, 12_288, 99_999, 150_001, 200_000] {
            let first = CRC32.checksum(Array(bytes[..<split]))
            #expect(CRC32.update(first, with: Array(bytes[split...])) == whole, "split at \(split)")
        }
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
    }
}
