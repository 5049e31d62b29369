import ArchiveIO
import Digest

/// A reserved file's final bytes: the reservation with 64 lowercase hex digits at each slot, from 32-byte
/// digests, made a window at a time so the final copy never exists whole (7.5 MB for a plist of 26,000
/// records, which pushed a 2 GiB build's peak RSS from 55 to 62 MiB).
struct FilledReservation: Sendable {
    /// The bytes as written first.
    let reserved: [UInt8]
    /// Where each slot's 64 digits start in `reserved`, ascending.
    let slots: [Int]
    /// 32 bytes a slot, in slot order.
    let digests: [UInt8]

    static let windowSize = 1 << 20

    /// The final bytes in `range`.
    func bytes(_ range: Range<Int>) -> [UInt8] {
        var window = Array(reserved[range])
        // The first slot whose digits reach into the range.
        var low = 0
        var high = slots.count
        while low < high {
            let middle = (low + high) / 2
            if slots[middle] + 64 <= range.lowerBound { low = middle + 1 } else { high = middle }
        }
        var slot = low
        while slot < slots.count && slots[slot] < range.upperBound {
            // Digit by digit into the window, rather than a String per digest (17 ms a build at 3,300 files).
            for position in max(slots[slot], range.lowerBound)..<min(slots[slot] + 64, range.upperBound) {
                let digit = position - slots[slot]
                let byte = digests[32 * slot + digit / 2]
                window[position - range.lowerBound] = Self.hexDigits[Int(digit % 2 == 0 ? byte >> 4 : byte & 0x0f)]
            }
            slot += 1
        }
        return window
    }

    /// Lowercase, as `hexString` writes them.
    private static let hexDigits = Array("0123456789abcdef".utf8)
}
