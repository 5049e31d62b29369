import PropertyList

/// Lookups of paths compared byte for byte (NFC and NFD spellings differ, as in `ExactPath`).
extension PositionIndex {
    /// The hash of a path compared byte for byte.
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
}
