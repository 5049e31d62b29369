/// Positions in a caller's array, found by a key that the caller hashes and compares: a small stand-in for
/// `[Key: Int]` or `Set<Key>` over the tens of thousands of paths of a big package (and the keys of a big
/// plist dictionary, such as HCPackIntegrity).
///
/// A Swift dictionary keyed by path keeps a 16 to 32-byte key and the value in every bucket, and the key often
/// holds a string of its own (a case-folded path, say). Here a slot is 8 bytes (the key's 32-bit hash and the
/// position) and the table is at most half full; when two hashes agree, the caller's `matches` compares the key
/// at that position with the one sought. At 26,000 paths that is 0.5 MB where each dictionary took 2 to 2.6 MB.
/// Growing never asks for a key again: the stored hashes place every entry.
///
/// Inlinable, so that the modules using it get the caller's `matches` inlined, as they did when it was theirs.
package struct PositionIndex: Sendable {
    /// 0 for an empty slot, else the hash in the high half and position + 1 in the low half.
    @usableFromInline var slots: [UInt64]
    @usableFromInline var storedCount = 0

    /// How many positions are stored.
    package var count: Int { storedCount }

    @inlinable
    package init(expectedCount: Int = 0) {
        var capacity = 16
        while capacity < expectedCount * 2 { capacity *= 2 }
        slots = Array(repeating: 0, count: capacity)
    }

    /// The hash matching String's own `==` (canonical equivalence), for keys compared as Strings.
    @inlinable
    package static func stringHash(_ key: String) -> UInt32 {
        UInt32(truncatingIfNeeded: key.hashValue)
    }

    /// The position whose key `matches` accepts, among those stored under `hash`.
    @inlinable
    package func find(_ hash: UInt32, where matches: (Int) -> Bool) -> Int? {
        var slot = Int(hash) & (slots.count - 1)
        while true {
            let stored = slots[slot]
            if stored == 0 { return nil }
            if UInt32(truncatingIfNeeded: stored >> 32) == hash {
                let position = Int(stored & 0xffff_ffff) - 1
                if matches(position) { return position }
            }
            slot = (slot + 1) & (slots.count - 1)
        }
    }

    /// Stores `position` unless a key that `matches` accepts is already there; returns that earlier position.
    @inlinable @discardableResult
    package mutating func insert(_ position: Int, hash: UInt32, where matches: (Int) -> Bool) -> Int? {
        store(position, hash: hash, replacing: false, where: matches)
    }

    /// Stores `position`, replacing the one of a key that `matches` accepts; returns the replaced position.
    @inlinable @discardableResult
    package mutating func update(_ position: Int, hash: UInt32, where matches: (Int) -> Bool) -> Int? {
        store(position, hash: hash, replacing: true, where: matches)
    }

    @inlinable
    mutating func store(_ position: Int, hash: UInt32, replacing: Bool, where matches: (Int) -> Bool) -> Int? {
        precondition(position >= 0 && position < Int(UInt32.max), "PositionIndex holds positions below 2^32 - 1")
        if (storedCount + 1) * 2 > slots.count { grow() }
        let entry = UInt64(hash) << 32 | UInt64(position + 1)
        var slot = Int(hash) & (slots.count - 1)
        while true {
            let stored = slots[slot]
            if stored == 0 {
                slots[slot] = entry
                storedCount += 1
                return nil
            }
            if UInt32(truncatingIfNeeded: stored >> 32) == hash {
                let earlier = Int(stored & 0xffff_ffff) - 1
                if matches(earlier) {
                    if replacing { slots[slot] = entry }
                    return earlier
                }
            }
            slot = (slot + 1) & (slots.count - 1)
        }
    }

    /// Doubles the table; the stored hashes place every entry again without asking for keys.
    @usableFromInline
    mutating func grow() {
        let old = slots
        slots = Array(repeating: 0, count: old.count * 2)
        let mask = slots.count - 1
        for stored in old where stored != 0 {
            var slot = Int(stored >> 32) & mask
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = stored
        }
    }
}
