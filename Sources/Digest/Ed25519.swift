internal import CCrypto

/// A failure of an Ed25519 operation: a key that cannot be read, or libcrypto refusing.
public struct Ed25519Error: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, in words fit for a message (never key material).
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

/// Ed25519 signatures through libcrypto, which signs in one shot (no streaming): callers sign a small
/// statement, never a whole file.
public enum Ed25519 {
    /// Bytes of a public key, a private key's seed, and a signature.
    public static let publicKeyByteCount = 32
    public static let seedByteCount = 32
    public static let signatureByteCount = 64

    /// Whether `signature` is `publicKey`'s signature of `message` (`EVP_DigestVerifyInit` with no digest, then
    /// one `EVP_DigestVerify`). A key or signature of the wrong length is simply not valid.
    public static func isValidSignature(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == signatureByteCount, publicKey.count == publicKeyByteCount else { return false }
        guard let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, publicKey.count) else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }
}

/// An Ed25519 private key held by libcrypto (`EVP_PKEY`), freed and wiped on deinit.
///
/// Not `Sendable`: one key belongs to one task. It never prints itself: `description` names no key material.
public final class Ed25519PrivateKey: CustomStringConvertible {
    private let key: OpaquePointer

    private init(key: OpaquePointer) { self.key = key }

    deinit { EVP_PKEY_free(key) }

    /// A new key from 32 random bytes (`RAND_bytes`, then `EVP_PKEY_new_raw_private_key`).
    public static func generate() throws(Ed25519Error) -> Ed25519PrivateKey {
        var seed = [UInt8](repeating: 0, count: Ed25519.seedByteCount)
        defer { wipe(&seed) }
        guard RAND_bytes(&seed, Int32(seed.count)) == 1 else {
            throw Ed25519Error("the system's random number generator failed (RAND_bytes); try again")
        }
        return try Ed25519PrivateKey(seed: seed)
    }

    /// The key of a 32-byte seed (RFC 8032's private key), as `EVP_PKEY_new_raw_private_key` takes it.
    public convenience init(seed: [UInt8]) throws(Ed25519Error) {
        guard seed.count == Ed25519.seedByteCount else {
            throw Ed25519Error("an Ed25519 private key is \(Ed25519.seedByteCount) bytes, not \(seed.count)")
        }
        guard let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, seed.count) else {
            throw Ed25519Error("libcrypto refused the Ed25519 private key (EVP_PKEY_new_raw_private_key)")
        }
        self.init(key: key)
    }

    /// The key in a PKCS#8 DER `PrivateKeyInfo` (RFC 8410, what `openssl genpkey -algorithm ed25519` writes),
    /// decoded by `d2i_AutoPrivateKey`; any other algorithm is refused.
    public convenience init(pkcs8 der: [UInt8]) throws(Ed25519Error) {
        let decoded: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_AutoPrivateKey(nil, &cursor, buffer.count)
        }
        guard let decoded else {
            throw Ed25519Error("not a PKCS#8 private key (d2i_AutoPrivateKey could not decode it)")
        }
        guard EVP_PKEY_get_id(decoded) == EVP_PKEY_ED25519 else {
            EVP_PKEY_free(decoded)
            throw Ed25519Error("not an Ed25519 key; make one with 'hcpack keygen' or 'openssl genpkey -algorithm ed25519'")
        }
        self.init(key: decoded)
    }

    /// The 32-byte public key (`EVP_PKEY_get_raw_public_key`).
    public var publicKey: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Ed25519.publicKeyByteCount)
        var length = bytes.count
        guard EVP_PKEY_get_raw_public_key(key, &bytes, &length) == 1, length == Ed25519.publicKeyByteCount else { return [] }
        return bytes
    }

    /// Hands the 32-byte seed to `body` and wipes it afterwards (`EVP_PKEY_get_raw_private_key`, `OPENSSL_cleanse`).
    public func withSeed<Result>(_ body: ([UInt8]) throws -> Result) rethrows -> Result {
        var seed = [UInt8](repeating: 0, count: Ed25519.seedByteCount)
        defer { Self.wipe(&seed) }
        var length = seed.count
        if EVP_PKEY_get_raw_private_key(key, &seed, &length) != 1 || length != seed.count {
            Self.wipe(&seed)
            return try body([])
        }
        return try body(seed)
    }

    /// The key as a PKCS#8 DER `PrivateKeyInfo`: the fixed RFC 8410 prefix, then the seed. The caller wipes it.
    public func pkcs8() -> [UInt8] {
        withSeed { seed in Self.pkcs8Prefix + seed }
    }

    /// `SEQUENCE { INTEGER 0, SEQUENCE { OID 1.3.101.112 }, OCTET STRING { OCTET STRING (32 bytes) } }`.
    static let pkcs8Prefix: [UInt8] = [
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
    ]

    /// The signature of `message` (`EVP_DigestSignInit` with no digest, then one `EVP_DigestSign`).
    public func sign(_ message: [UInt8]) throws(Ed25519Error) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw Ed25519Error("out of memory (EVP_MD_CTX_new)") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1 else {
            throw Ed25519Error("libcrypto could not start an Ed25519 signature (EVP_DigestSignInit)")
        }
        var signature = [UInt8](repeating: 0, count: Ed25519.signatureByteCount)
        var length = signature.count
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == signature.count else {
            throw Ed25519Error("libcrypto could not sign (EVP_DigestSign)")
        }
        return signature
    }

    /// Never the key itself.
    public var description: String { "Ed25519PrivateKey(public: \(publicKey.hexString))" }

    /// Overwrites `bytes` with zeros in a way the compiler keeps (`OPENSSL_cleanse`).
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { OPENSSL_cleanse(base, raw.count) }
        }
    }
}

/// Whether two byte strings are equal, in time that depends only on their length (`CRYPTO_memcmp`).
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return CRYPTO_memcmp(a, b, a.count) == 0
}
