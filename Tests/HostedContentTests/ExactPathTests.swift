import HostedContent
import Testing

@Suite("ExactPath")
struct ExactPathTests {
    @Test("NFC and NFD spellings are different keys, though String calls them equal")
    func normalizationsDiffer() {
        let composed = "Contents/caf\u{e9}.txt"
        let decomposed = "Contents/cafe\u{301}.txt"
        #expect(composed == decomposed)
        #expect(ExactPath(composed) != ExactPath(decomposed))
        #expect(Set([ExactPath(composed), ExactPath(decomposed)]).count == 2)
        #expect(ExactPath(composed).bytes == Array(composed.utf8))
    }

    @Test("A key made from a substring equals the key of the same bytes as a string")
    func substringsAndStrings() {
        let path = "Contents/levels/one/two.json"
        let parent = path[..<path.lastIndex(of: "/")!]
        #expect(ExactPath(parent) == ExactPath("Contents/levels/one"))
        #expect(ExactPath(parent).hashValue == ExactPath("Contents/levels/one").hashValue)
        let lookup: [ExactPath: Int] = [ExactPath("Contents/levels/one"): 1, ExactPath(""): 2]
        #expect(lookup[ExactPath(parent)] == 1)
        #expect(lookup[ExactPath(path.prefix(0))] == 2)
        #expect(lookup[ExactPath("Contents/levels/on")] == nil)
        #expect(ExactPath("a\u{0}b") != ExactPath("a"))
    }
}
