internal import CCrypto

/// How libcrypto starts in this process.
public enum LibCrypto {
    /// Starts libcrypto without its error strings and its tables of every cipher and digest by name, which
    /// cost each process 0.5 ms of CPU on Debian 12 (bench/README.md, "Making the json delta"). Only for a
    /// process that makes no TLS connection: libssl's certificate checks look digests up in those tables
    /// ("CA signature digest algorithm too weak" without them), and libcrypto starts once, so a later TLS
    /// client could not add them back. hcpack's own calls (SHA-256, MD5, Ed25519) need neither. Call before
    /// anything else uses libcrypto; later calls change nothing.
    public static func startWithoutTLS() {
        let options =
            UInt64(OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS) | UInt64(OPENSSL_INIT_NO_ADD_ALL_CIPHERS)
            | UInt64(OPENSSL_INIT_NO_ADD_ALL_DIGESTS)
        _ = OPENSSL_init_crypto(options, nil)
    }
}
