import Digest
import Foundation
import Testing

@Suite("Ed25519 over libcrypto")
struct Ed25519Tests {
    // RFC 8032, section 7.1, test 2 (one-byte message 0x72).
    let seed = bytes(fromHex: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")!
    let publicKey = bytes(fromHex: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")!
    let signature = bytes(
        fromHex:
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
    )!

    @Test("RFC 8032 test 2: the public key, the signature, and verification")
    func rfc8032() throws {
        let key = try Ed25519PrivateKey(seed: seed)
        #expect(key.publicKey == publicKey)
        #expect(try key.sign([0x72]) == signature)
        #expect(Ed25519.isValidSignature(signature, of: [0x72], publicKey: publicKey))
        #expect(!Ed25519.isValidSignature(signature, of: [0x73], publicKey: publicKey))
        #expect(!Ed25519.isValidSignature(Array(signature.dropLast()), of: [0x72], publicKey: publicKey))
    }

    @Test("PKCS#8 PEM round trip; the description never shows the seed")
    func pkcs8() throws {
        let key = try Ed25519PrivateKey.generate()
        let pem = PEMBlock(label: "PRIVATE KEY", der: key.pkcs8()).encoded()
        let block = try #require(PEMBlock.decode(pem))
        #expect(block.der.count == 48)
        let again = try Ed25519PrivateKey(pkcs8: block.der)
        #expect(again.publicKey == key.publicKey)
        key.withSeed { seed in
            #expect(seed.count == 32)
            #expect(!key.description.contains(seed.hexString))
        }
        #expect(throws: Ed25519Error.self) { try Ed25519PrivateKey(pkcs8: Array(block.der.prefix(20))) }
    }
}
