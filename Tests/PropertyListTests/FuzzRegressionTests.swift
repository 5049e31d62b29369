import Testing
@testable import PropertyList

/// Inputs the fuzzers (docs/fuzzing.md) turned up, pinned so they stay fixed.
@Suite("Fuzz regressions: property lists")
struct PlistFuzzRegressionTests {
    typealias B = BinaryPlistBuilder

    /// Many distinct keys: `PlistDictionary.init` searched its entries linearly for every key, so decoding
    /// was quadratic (a 70 KB binary plist with 5,000 keys took seconds, an 8 MiB one hours). This test
    /// cannot fail by timing; before the fix it took minutes, and it checks order and values.
    static let keyCount = 30_000

    static func key(_ index: Int) -> String { "k\(index)" }

    @Test("a binary dictionary with 30,000 keys decodes, keys in file order")
    func binaryManyKeys() throws {
        var b = B()
        b.refSize = 3
        let count = Self.keyCount
        // Object 0 is the dict, 1 the shared value, then the keys.
        b.add(b.dict(Array(2..<(2 + count)), Array(repeating: 1, count: count)))
        b.add(B.int(7))
        for index in 0..<count { b.add(B.ascii(Self.key(index))) }
        let value = try PropertyList.decode(b.bytes(offsetIntSize: 4)).value
        guard case .dictionary(let dictionary) = value else {
            Issue.record("decoded a \(value.typeName)")
            return
        }
        #expect(dictionary.entries.count == count)
        #expect(dictionary.keys.first == Self.key(0))
        #expect(dictionary.keys.last == Self.key(count - 1))
        #expect(dictionary[Self.key(count / 2)] == .integer(7))
    }

    @Test("an XML dictionary with 30,000 keys decodes, keys in document order")
    func xmlManyKeys() throws {
        var body = "<dict>"
        for index in 0..<Self.keyCount { body += "<key>\(Self.key(index))</key><true/>" }
        body += "</dict>"
        let value = try PropertyList.decode(Fixtures.plist(body)).value
        guard case .dictionary(let dictionary) = value else {
            Issue.record("decoded a \(value.typeName)")
            return
        }
        #expect(dictionary.entries.count == Self.keyCount)
        #expect(dictionary.keys.last == Self.key(Self.keyCount - 1))
    }

    @Test("PlistDictionary keeps first-seen order and lets a later duplicate replace the value in place")
    func duplicateEntriesReplaceInPlace() {
        let dictionary = PlistDictionary([
            .init(key: "a", value: .integer(1)), .init(key: "b", value: .integer(2)), .init(key: "a", value: .integer(3)),
        ])
        #expect(dictionary.keys == ["a", "b"])
        #expect(dictionary["a"] == .integer(3))
    }

    @Test("A dictionary past its index threshold finds keys as Strings do, through replacements and removals")
    func indexedDictionary() {
        var dictionary = PlistDictionary()
        for index in 0..<40 { dictionary["k\(index)"] = .integer(Int64(index)) }
        dictionary["caf\u{e9}"] = .integer(100)
        #expect(dictionary["cafe\u{301}"] == .integer(100))
        dictionary["cafe\u{301}"] = .integer(101)
        dictionary["k3"] = nil
        dictionary["k5"] = .boolean(true)
        for index in 0..<3 { dictionary["k\(index)"] = nil }
        #expect(dictionary.keys == (4..<40).map { "k\($0)" } + ["caf\u{e9}"])
        #expect(dictionary["k3"] == nil && dictionary["k5"] == .boolean(true) && dictionary["k39"] == .integer(39))
        #expect(dictionary["caf\u{e9}"] == .integer(101))
        dictionary["new"] = .string("x")
        #expect(dictionary.keys.last == "new" && dictionary["new"] == .string("x"))
    }

    @Test("a doubling chain of 63 arrays under maxObjects: .max is refused as a limit, not an overflow trap")
    func expansionOverflowWithoutObjectLimit() {
        // Object k (0...62) is [k+1, k+1]; object 63 is true. Object 1 expands to exactly Int.max values,
        // object 0 to one more: `total += size` trapped before the saturation check could run.
        var b = B()
        for index in 0..<63 { b.add(b.array([index + 1, index + 1])) }
        b.add(B.true)
        let error = Fixtures.error(b.bytes(), limits: PlistLimits(maxObjects: .max))
        #expect(error?.kind == .limit)
        #expect(error?.message.contains("expands to more than") == true, "\(String(describing: error))")
    }
}
