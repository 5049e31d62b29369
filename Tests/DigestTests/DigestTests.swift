import Digest
import Testing

@Suite("Digest")
struct DigestTests {
    @Test("SHA-256 and MD5 match the published test vectors")
    func knownVectors() {
        let abc = Array("abc".utf8)
        #expect(Hasher.digest(.sha256, of: abc).hexString == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Hasher.digest(.md5, of: abc).hexString == "900150983cd24fb0d6963f7d28e17f72")
        #expect(Hasher.digest(.sha256, of: []).hexString == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test("Incremental updates give the same digest as one update")
    func incremental() {
        let data = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let hasher = Hasher(.sha256)
        for chunk in stride(from: 0, to: data.count, by: 4093) {
            hasher.update(Array(data[chunk..<min(chunk + 4093, data.count)]))
        }
        #expect(hasher.finalize() == Hasher.digest(.sha256, of: data))
    }

    @Test("Hex round trip, and malformed hex is refused")
    func hex() {
        #expect(bytes(fromHex: "00ff10Ab") == [0x00, 0xff, 0x10, 0xab])
        #expect(bytes(fromHex: "abc") == nil)
        #expect(bytes(fromHex: "zz") == nil)
        #expect([0xde, 0xad].hexString == "dead")
    }

    @Test("matchesHex accepts exactly the lowercase hex of the bytes, contiguous or not")
    func matchesHex() {
        let digest = Hasher.digest(.sha256, of: Array("abc".utf8))
        #expect(digest.matchesHex(digest.hexString))
        #expect(!digest.matchesHex(digest.hexString.uppercased()))
        #expect(!digest.matchesHex(String(digest.hexString.dropLast())))
        #expect(!digest.matchesHex(digest.hexString + "0"))
        #expect(!digest.matchesHex("0" + digest.hexString.dropFirst()))
        #expect(!digest.matchesHex(digest.hexString.dropLast() + "0"))
        #expect([UInt8]().matchesHex(""))
        // Repeated has no contiguous storage.
        #expect(repeatElement(UInt8(0xab), count: 2).matchesHex("abab"))
        #expect(!repeatElement(UInt8(0xab), count: 2).matchesHex("abac"))
        #expect(digest[4...].matchesHex(String(digest.hexString.dropFirst(8))))
    }
}
