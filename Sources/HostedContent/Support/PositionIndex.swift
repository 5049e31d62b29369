/// Positions in a caller's array, found by a key that the caller hashes and compares: a small stand-in for
/// `[Key: Int]` or `Set<Key>` over the tens of thousands of paths of a big package.
///
/// A Swift dictionary keyed by path keeps a 16 to 32-byte key and the value in every bucket, and the key often
/// holds a string of its own (a case-folded path, say). Here a slot is 8 bytes (the key's 32-bit hash and the
/// position) and the table is at most half full; when two hashes agree, the caller's `matches` compares the key
/// at that position with the one sought. At 26,000 paths that is 0.5 MB where each dictionary took 2 to 2.6 MB.
struct PositionIndex {
    /// 0 for an empty slot, else the hash in the high half and position + 1 in the low half.
    private var slots: [UInt64]
    private(set) var count = 0

    init(expectedCount: Int = 0) {
        var capacity = 16
        while capacity < expectedCount * 2 { capacity *= 2 }
        slots = Array(repeating: 0, count: capacity)
    }

    /// The hash of a path compared byte for byte (NFC and NFD spellings differ, as in `ExactPath`).
    static func exactHash(_ path: String) -> UInt32 {
        var path = path
        return path.withUTF8 { exactHash(UnsafeRawBufferPointer($0)) }
    }

    static func exactHash(_ path: Substring) -> UInt32 {
        var path = path
        return path.withUTF8 { exactHash(UnsafeRawBufferPointer($0)) }
    }

    private static func exactHash(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var hasher = Swift.Hasher()
        hasher.combine(bytes: bytes)
        return UInt32(truncatingIfNeeded: hasher.finalize())
    }

    /// `exactHash(prefix + key)`, without building that string: `Hasher` takes bytes as one stream, whatever
    /// the pieces they come in.
    static func exactHash(_ key: Substring, after prefix: String) -> UInt32 {
        var key = key
        var prefix = prefix
        return prefix.withUTF8 { head in key.withUTF8 { tail in exactHash(head, tail) } }
    }

    private static func exactHash(_ head: UnsafeBufferPointer<UInt8>, _ tail: UnsafeBufferPointer<UInt8>) -> UInt32 {
        var hasher = Swift.Hasher()
        hasher.combine(bytes: UnsafeRawBufferPointer(head))
        hasher.combine(bytes: UnsafeRawBufferPointer(tail))
        return UInt32(truncatingIfNeeded: hasher.finalize())
    }

    /// The hash matching String's own `==` (canonical equivalence), for keys compared as Strings.
    static func stringHash(_ key: String) -> UInt32 {
        UInt32(truncatingIfNeeded: key.hashValue)
    }

    /// The position whose key `matches` accepts, among those stored under `hash`.
    func find(_ hash: UInt32, where matches: (Int) -> Bool) -> Int? {
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

    /// The position whose key, `keyAt(position)`, has exactly the bytes of `key` (NFC and NFD spellings differ).
    func find(exactly key: Substring, keyAt: (Int) -> String) -> Int? {
        find(Self.exactHash(key)) { ExactPath(keyAt($0)) == ExactPath(key) }
    }

    func find(exactly key: String, keyAt: (Int) -> String) -> Int? { find(exactly: key[...], keyAt: keyAt) }

    /// `find(exactly:keyAt:)` for the key `prefix + key`, without building that string (verify looks up every
    /// listed file under "Contents/").
    func find(exactly key: Substring, after prefix: String, keyAt: (Int) -> String) -> Int? {
        var key = key
        var prefix = prefix
        return prefix.withUTF8 { head in
            key.withUTF8 { tail in
                find(Self.exactHash(head, tail)) { position in
                    var stored = keyAt(position)
                    return stored.withUTF8 { ExactPath.bytes($0, are: head, then: tail) }
                }
            }
        }
    }

    /// `insert` for a key compared byte for byte, as `find(exactly:keyAt:)` does.
    @discardableResult
    mutating func insert(_ position: Int, exactly key: String, keyAt: (Int) -> String) -> Int? {
        insert(position, hash: Self.exactHash(key)) { ExactPath(keyAt($0)) == ExactPath(key) }
    }

    /// `update` for a key compared byte for byte, as `find(exactly:keyAt:)` does.
    @discardableResult
    mutating func update(_ position: Int, exactly key: String, keyAt: (Int) -> String) -> Int? {
        update(position, hash: Self.exactHash(key)) { ExactPath(keyAt($0)) == ExactPath(key) }
    }

    /// Stores `position` unless a key that `matches` accepts is already there; returns that earlier position.
    @discardableResult
    mutating func insert(_ position: Int, hash: UInt32, where matches: (Int) -> Bool) -> Int? {
        store(position, hash: hash, replacing: false, where: matches)
    }

    /// Stores `position`, replacing the one of a key that `matches` accepts; returns the replaced position.
    @discardableResult
    mutating func update(_ position: Int, hash: UInt32, where matches: (Int) -> Bool) -> Int? {
        store(position, hash: hash, replacing: true, where: matches)
    }

    private mutating func store(_ position: Int, hash: UInt32, replacing: Bool, where matches: (Int) -> Bool) -> Int? {
        precondition(position >= 0 && position < Int(UInt32.max), "PositionIndex holds positions below 2^32 - 1")
        if (count + 1) * 2 > slots.count { grow() }
        let entry = UInt64(hash) << 32 | UInt64(position + 1)
        var slot = Int(hash) & (slots.count - 1)
        while true {
            let stored = slots[slot]
            if stored == 0 {
                slots[slot] = entry
                count += 1
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
    private mutating func grow() {
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

/// Finds paths that differ from an earlier one only in Unicode normalization, or only in case, keeping
/// positions rather than a key string per path.
struct CollisionFinder {
    enum Collision {
        /// The earlier path is the same after NFC normalization.
        case normalization(String)
        /// The earlier path is the same after normalization and case folding.
        case folded(String)
    }

    private var byNormalization: PositionIndex
    private var byFolding: PositionIndex

    init(expectedCount: Int) {
        byNormalization = PositionIndex(expectedCount: expectedCount)
        byFolding = PositionIndex(expectedCount: expectedCount)
    }

    /// Records the path at `position`, or names the earlier path it collides with (then it is not recorded).
    mutating func add(_ position: Int, path: String, pathAt: (Int) -> String) -> Collision? {
        let (normalized, foldedIfOther) = PackagePath.collisionKeys(path)
        let normalizedHash = PositionIndex.stringHash(normalized)
        let sameNormalization = byNormalization.insert(position, hash: normalizedHash) {
            PackagePath.normalizationKey(pathAt($0)) == normalized
        }
        if let earlier = sameNormalization { return .normalization(pathAt(earlier)) }
        let folded = foldedIfOther ?? normalized
        let sameFolding = byFolding.insert(position, hash: foldedIfOther.map(PositionIndex.stringHash) ?? normalizedHash) {
            PackagePath.foldKey(pathAt($0)) == folded
        }
        if let earlier = sameFolding { return .folded(pathAt(earlier)) }
        return nil
    }
}
