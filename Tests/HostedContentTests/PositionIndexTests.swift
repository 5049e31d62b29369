@testable import HostedContent
import PropertyList
import Testing

@Suite("PositionIndex")
struct PositionIndexTests {
    @Test("Finds every one of 20,000 paths after growing from the smallest table, and nothing else")
    func findsAfterGrowing() {
        let paths = (0..<20_000).map { "Contents/level-\($0 % 97)/item-\($0).json" }
        var index = PositionIndex()
        for (position, path) in paths.enumerated() {
            let earlier = index.insert(position, hash: PositionIndex.exactHash(path)) { paths[$0] == path }
            #expect(earlier == nil)
        }
        #expect(index.count == paths.count)
        for (position, path) in paths.enumerated() where position % 7 == 0 {
            #expect(index.find(PositionIndex.exactHash(path)) { paths[$0] == path } == position)
        }
        let absent = "Contents/level-1/item-20000.json"
        #expect(index.find(PositionIndex.exactHash(absent)) { paths[$0] == absent } == nil)
    }

    @Test("Keys whose hashes collide are told apart by the caller's comparison; insert keeps, update replaces")
    func collisionsAndReplacement() {
        let keys = ["a", "b", "a", "c", "b"]
        var index = PositionIndex()
        // One hash for every key: every probe walks the same run of slots.
        let inserted = keys.indices.map { position in index.insert(position, hash: 7) { keys[$0] == keys[position] } }
        #expect(inserted == [nil, nil, 0, nil, 1])
        #expect(index.count == 3)
        #expect(index.find(7) { keys[$0] == "b" } == 1)
        #expect(index.update(4, hash: 7) { keys[$0] == "b" } == 1)
        #expect(index.find(7) { keys[$0] == "b" } == 4)
        #expect(index.find(7) { keys[$0] == "d" } == nil)
    }

    @Test("Exact hashes agree for a String and a Substring of the same bytes")
    func exactHashOfSubstring() {
        let path = "Contents/levels/one.json"
        let parent = path[..<path.lastIndex(of: "/")!]
        #expect(PositionIndex.exactHash(parent) == PositionIndex.exactHash("Contents/levels"))
    }

    @Test("A key found after a prefix hashes and matches as the whole string does")
    func findAfterPrefix() {
        let paths = ["Contents/a.json", "Contents/levels/one.json", "Contents/", "Contents/\u{e9}", "Other/a.json"]
        var index = PositionIndex()
        for (position, path) in paths.enumerated() { index.insert(position, exactly: path) { paths[$0] } }
        for prefix in ["", "C", "Contents/", "Contents/levels/"] {
            // Splits on both sides of Hasher's 8-byte words.
            for length in 0...40 {
                let key = String(repeating: "x", count: length)
                #expect(PositionIndex.exactHash(key[...], after: prefix) == PositionIndex.exactHash(prefix + key))
            }
        }
        #expect(index.find(exactly: "levels/one.json", after: "Contents/") { paths[$0] } == 1)
        #expect(index.find(exactly: "", after: "Contents/") { paths[$0] } == 2)
        #expect(index.find(exactly: "\u{e9}", after: "Contents/") { paths[$0] } == 3)
        #expect(index.find(exactly: "e\u{301}", after: "Contents/") { paths[$0] } == nil)
        #expect(index.find(exactly: "a.json", after: "Other/") { paths[$0] } == 4)
        #expect(index.find(exactly: "a.jso", after: "Contents/") { paths[$0] } == nil)
    }

    @Test("Collision keys: ASCII folds byte by byte and shares the string when lower case; other names are NFC, lowered")
    func collisionKeys() {
        #expect(PackagePath.collisionKeys("levels/one.json") == ("levels/one.json", nil))
        #expect(PackagePath.collisionKeys("Contents/Levels/ONE.json") == ("Contents/Levels/ONE.json", "contents/levels/one.json"))
        #expect(PackagePath.collisionKeys("") == ("", nil))
        let nfd = "Cafe\u{301}/X.txt"
        let keys = PackagePath.collisionKeys(nfd)
        #expect(Array(keys.normalized.utf8) == Array("Caf\u{e9}/X.txt".utf8))
        #expect(keys.folded.map { Array($0.utf8) } == Array("caf\u{e9}/x.txt".utf8))
        #expect(PackagePath.foldKey(nfd) == "caf\u{e9}/x.txt" && PackagePath.foldKey("A@Z[") == "a@z[")
        // The Kelvin sign is K once normalized, so it collides with a plain k.
        #expect(PackagePath.foldKey("\u{212a}.txt") == PackagePath.foldKey("K.TXT"))
    }

    @Test("CollisionFinder names the earlier path for a normalization twin and a case twin, and records neither")
    func collisionFinder() {
        let paths = ["Caf\u{e9}.txt", "Cafe\u{301}.txt", "CAF\u{c9}.TXT", "other.txt", "OTHER.txt", "Other.TXT"]
        var finder = CollisionFinder(expectedCount: 0)
        var found: [String] = []
        for (position, path) in paths.enumerated() {
            switch finder.add(position, path: path, pathAt: { paths[$0] }) {
            case .normalization(let earlier): found.append("nfc:\(earlier)")
            case .folded(let earlier): found.append("case:\(earlier)")
            case nil: found.append("-")
            }
        }
        #expect(found == ["-", "nfc:Caf\u{e9}.txt", "case:Caf\u{e9}.txt", "-", "case:other.txt", "case:other.txt"])
    }
}
