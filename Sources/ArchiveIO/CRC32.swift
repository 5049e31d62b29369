/// CRC-32 as zip uses it (IEEE 802.3, reflected, polynomial 0xEDB88320): for every zip entry verify and
/// install read (instead of libarchive's check, zlib's `crc32` on the reading thread, a quarter of an
/// install's; install computes it on a worker).
///
/// Sixteen bytes a step with sixteen tables ("slicing-by-16"), and for large buffers three lanes at once whose
/// CRCs are then joined (`combine`): one lane waits on its own previous step, three keep the loads in flight.
/// About 3.1 GB/s here, as fast as zlib 1.2.13 (one lane: 1.8 GB/s).
public enum CRC32 {
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 16 * 256)
        for index in 0..<256 {
            var value = UInt32(index)
            for _ in 0..<8 { value = value & 1 != 0 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
            tables[index] = value
        }
        for slice in 1..<16 {
            for index in 0..<256 {
                let previous = tables[(slice - 1) * 256 + index]
                tables[slice * 256 + index] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()
    /// x^(2^k) modulo the polynomial, k = 0..<32 (bit 31 is x^0: the reflected order).
    private static let powers: [UInt32] = {
        var powers = [UInt32](repeating: 0, count: 32)
        var power: UInt32 = 1 << 30  // x^1
        for k in 0..<32 { powers[k] = power; power = multiply(power, power) }
        return powers
    }()

    /// The product of two polynomials modulo the CRC polynomial (GF(2), reflected).
    static func multiply(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var product: UInt32 = 0
        var b = b
        var bit: UInt32 = 1 << 31
        while bit != 0 {
            if a & bit != 0 { product ^= b }
            bit >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ 0xEDB8_8320 : b >> 1
        }
        return product
    }

    /// The CRC of A followed by B, from the CRCs of A and of B and B's length: A's CRC moved on by B's length
    /// in zero bytes (a multiplication by x^(8 x length)), plus B's.
    static func combine(_ first: UInt32, _ second: UInt32, secondLength: Int) -> UInt32 {
        var shift: UInt32 = 1 << 31  // x^0
        var n = secondLength
        var k = 3  // bytes to bits
        while n != 0 {
            if n & 1 != 0 { shift = multiply(powers[k & 31], shift) }
            n >>= 1
            k += 1
        }
        return multiply(shift, first) ^ second
    }

    /// The checksum of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 { update(0, with: bytes) }

    /// The checksum of the bytes `crc` covers followed by `bytes`.
    public static func update(_ crc: UInt32, with bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { update(crc, with: $0) } }

    /// Below this, one lane: joining costs about as much as 2 KB of data.
    static let laneThreshold = 3 * 4096

    /// The checksum of the bytes `crc` covers followed by `bytes`.
    public static func update(_ crc: UInt32, with bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress else { return crc }
        if bytes.count < laneThreshold { return sliced(crc, base, bytes.count) }
        let lane = bytes.count / 3 & ~15
        let (a, b, c) = threeLanes(crc, base, lane)
        let joined = combine(combine(a, b, secondLength: lane), c, secondLength: lane)
        return sliced(joined, base + 3 * lane, bytes.count - 3 * lane)
    }

    private static func sliced(_ crc: UInt32, _ start: UnsafeRawPointer, _ count: Int) -> UInt32 {
        tables.withUnsafeBufferPointer { tables in
            let table = tables.baseAddress!
            func lookup(_ slice: Int, _ byte: UInt64) -> UInt32 { table[slice << 8 | Int(byte & 0xFF)] }
            var value = ~crc
            var position = start
            var remaining = count
            while remaining >= 16 {
                let low = UInt64(littleEndian: position.loadUnaligned(as: UInt64.self)) ^ UInt64(value)
                let high = UInt64(littleEndian: position.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                value = step(table, low, high)
                position += 16
                remaining -= 16
            }
            while remaining > 0 {
                value = lookup(0, UInt64((value ^ UInt32(position.load(as: UInt8.self))) & 0xFF)) ^ (value >> 8)
                position += 1
                remaining -= 1
            }
            return ~value
        }
    }

    @inline(__always)
    private static func step(_ table: UnsafePointer<UInt32>, _ low: UInt64, _ high: UInt64) -> UInt32 {
        func lookup(_ slice: Int, _ byte: UInt64) -> UInt32 { table[slice << 8 | Int(byte & 0xFF)] }
        return lookup(15, low) ^ lookup(14, low >> 8) ^ lookup(13, low >> 16) ^ lookup(12, low >> 24)
            ^ lookup(11, low >> 32) ^ lookup(10, low >> 40) ^ lookup(9, low >> 48) ^ lookup(8, low >> 56)
            ^ lookup(7, high) ^ lookup(6, high >> 8) ^ lookup(5, high >> 16) ^ lookup(4, high >> 24)
            ^ lookup(3, high >> 32) ^ lookup(2, high >> 40) ^ lookup(1, high >> 48) ^ lookup(0, high >> 56)
    }

    /// Final CRCs of three consecutive lanes of `lane` bytes (a multiple of 16): the first continues `crc`,
    /// the others start fresh. Three independent chains keep the loads in flight.
    private static func threeLanes(_ crc: UInt32, _ start: UnsafeRawPointer, _ lane: Int) -> (UInt32, UInt32, UInt32) {
        tables.withUnsafeBufferPointer { tables in
            let table = tables.baseAddress!
            var a = ~crc, b: UInt32 = ~0, c: UInt32 = ~0
            var offset = 0
            while offset < lane {
                let pa = start + offset, pb = start + lane + offset, pc = start + 2 * lane + offset
                a = step(table, UInt64(littleEndian: pa.loadUnaligned(as: UInt64.self)) ^ UInt64(a), UInt64(littleEndian: pa.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                b = step(table, UInt64(littleEndian: pb.loadUnaligned(as: UInt64.self)) ^ UInt64(b), UInt64(littleEndian: pb.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                c = step(table, UInt64(littleEndian: pc.loadUnaligned(as: UInt64.self)) ^ UInt64(c), UInt64(littleEndian: pc.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                offset += 16
            }
            return (~a, ~b, ~c)
        }
    }
}
