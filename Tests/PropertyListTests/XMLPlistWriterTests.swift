import Foundation
import Testing
@testable import PropertyList

@Suite("XML property list writing")
struct XMLPlistWriterTests {
    @Test("output matches Apple's layout byte for byte")
    func appleLayout() {
        let value: PlistValue = .dictionary(PlistDictionary([
            .init(key: "IAPProductIdentifier", value: .string("com.example.pack")),
            .init(key: "A&B <x>", value: .string("1 < 2 & 3 > 2")),
            .init(key: "Files", value: .array([.string("a"), .array([])])),
            .init(key: "Empty", value: .dictionary(PlistDictionary())),
            .init(key: "Count", value: .integer(-42)),
            .init(key: "Ratio", value: .real(0.5)),
            .init(key: "Whole", value: .real(3)),
            .init(key: "On", value: .boolean(true)),
            .init(key: "Off", value: .boolean(false)),
            .init(key: "When", value: .date(Date(timeIntervalSince1970: 1_767_323_045))),
            .init(key: "Blob", value: .data([0, 1, 2, 0xFF])),
        ]))
        let expected = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
            \t<key>IAPProductIdentifier</key>
            \t<string>com.example.pack</string>
            \t<key>A&amp;B &lt;x&gt;</key>
            \t<string>1 &lt; 2 &amp; 3 &gt; 2</string>
            \t<key>Files</key>
            \t<array>
            \t\t<string>a</string>
            \t\t<array/>
            \t</array>
            \t<key>Empty</key>
            \t<dict/>
            \t<key>Count</key>
            \t<integer>-42</integer>
            \t<key>Ratio</key>
            \t<real>0.5</real>
            \t<key>Whole</key>
            \t<real>3</real>
            \t<key>On</key>
            \t<true/>
            \t<key>Off</key>
            \t<false/>
            \t<key>When</key>
            \t<date>2026-01-02T03:04:05Z</date>
            \t<key>Blob</key>
            \t<data>AAEC/w==</data>
            </dict>
            </plist>

            """
        #expect(String(decoding: PropertyList.encodeXML(value), as: UTF8.self) == expected)
    }

    @Test("the same value always encodes to the same bytes")
    func deterministic() {
        #expect(PropertyList.encodeXML(Fixtures.contentInfo) == PropertyList.encodeXML(Fixtures.contentInfo))
        #expect(PropertyList.encodeXML(.string("x")) != PropertyList.encodeXML(.string("y")))
    }

    @Test("decoding the fixture and encoding it again reproduces Apple's text")
    func reencodeFixture() throws {
        let (value, _) = try PropertyList.decode(Fixtures.utf8(Fixtures.contentInfoXML))
        #expect(String(decoding: PropertyList.encodeXML(value), as: UTF8.self) == Fixtures.contentInfoXML)
    }

    @Test("every value type survives encode then decode", arguments: RoundTrip.samples)
    func roundTrip(sample: RoundTrip) throws {
        let (decoded, format) = try PropertyList.decode(PropertyList.encodeXML(sample.value))
        #expect(format == .xml)
        #expect(decoded == sample.value)
    }

    @Test("a large mixed document with unknown keys round trips, keys in order")
    func bigDocument() throws {
        var generator = SplitMix(seed: 7)
        let value = RoundTrip.random(&generator, depth: 0)
        let (decoded, _) = try PropertyList.decode(PropertyList.encodeXML(value))
        #expect(decoded == value)
    }

    @Test("dates with sub-second parts, before and after 2001, are written as Apple writes them: whole seconds, rounded down")
    func fractionalDates() throws {
        var g = SplitMix(seed: 11)
        var dates: [Date] = []
        for _ in 0..<2_000 {
            dates.append(Date(timeIntervalSinceReferenceDate: Double(g.next() % 600_000_000_000) / 997 - 3e8))
            dates.append(Date(timeIntervalSinceReferenceDate: Double(g.next() % 1_000) * 1e-9 - 5e-7))
        }
        let (decoded, _) = try PropertyList.decode(PropertyList.encodeXML(.array(dates.map { .date($0) })))
        let whole = dates.map { PlistValue.date(Date(timeIntervalSinceReferenceDate: $0.timeIntervalSinceReferenceDate.rounded(.down))) }
        #expect(decoded == .array(whole))
        #expect(String(decoding: PropertyList.encodeXML(.date(Date(timeIntervalSinceReferenceDate: -0.3))), as: UTF8.self)
            .contains("<date>2000-12-31T23:59:59Z</date>"))
        #expect(String(decoding: PropertyList.encodeXML(.date(Date(timeIntervalSinceReferenceDate: 59.999))), as: UTF8.self)
            .contains("<date>2001-01-01T00:00:59Z</date>"))
    }

    @Test("Python's plistlib and Foundation's PropertyListSerialization read every date hcpack writes as the same second")
    func datesReadByOtherReaders() throws {
        let dates = [
            1_767_323_045, 0, -1, 951_782_400, -2_208_988_800, 4_102_444_799, 123.456, -0.3, -1_000_000_000.000_001,
            -62_135_596_800,  // 0001-01-01T00:00:00Z
        ].map { Date(timeIntervalSince1970: $0) }
        let expected = dates.map { Int64($0.timeIntervalSince1970.rounded(.down)) }
        let encoded = PropertyList.encodeXML(.array(dates.map { .date($0) }))
        let text = String(decoding: encoded, as: UTF8.self)
        let written = text.split(separator: "\n").filter { $0.contains("<date>") }
        #expect(written.count == dates.count)
        #expect(written.allSatisfy { $0.wholeMatch(of: /\t<date>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ<\/date>/) != nil }, "\(written)")

        // Foundation's own reader.
        var format = PropertyListSerialization.PropertyListFormat.xml
        let read = try PropertyListSerialization.propertyList(from: Data(encoded), options: [], format: &format)
        let foundationDates = try #require(read as? [Date], "\(read)")
        #expect(foundationDates.map { Int64($0.timeIntervalSince1970.rounded(.down)) } == expected)
        #expect(foundationDates.allSatisfy { $0.timeIntervalSince1970 == $0.timeIntervalSince1970.rounded(.down) })

        // Python's plistlib (which reads no fraction): seconds since 1970 of each date, in UTC.
        let path = NSTemporaryDirectory() + "/hcpack-dates-\(getpid()).plist"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(encoded).write(to: URL(fileURLWithPath: path))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import calendar, plistlib, sys\nfor d in plistlib.load(open(sys.argv[1], 'rb')): print(calendar.timegm(d.utctimetuple()))",
            path,
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(output)")
        #expect(output.split(separator: "\n").map { Int64($0) } == expected.map { Optional($0) }, "\(output)")
    }

    @Test("NaN encodes as nan and decodes to NaN")
    func nan() throws {
        let bytes = PropertyList.encodeXML(.real(.nan))
        #expect(String(decoding: bytes, as: UTF8.self).contains("<real>nan</real>"))
        guard case .real(let real) = try PropertyList.decode(bytes).value else { Issue.record("not a real"); return }
        #expect(real.isNaN)
    }

    @Test("dates outside years 1 to 9999 are clamped")
    func clampedDates() throws {
        let far = PropertyList.encodeXML(.date(Date(timeIntervalSinceReferenceDate: 1e15)))
        #expect(String(decoding: far, as: UTF8.self).contains("<date>9999-12-31T23:59:59Z</date>"))
        let early = PropertyList.encodeXML(.date(Date(timeIntervalSinceReferenceDate: -1e15)))
        #expect(String(decoding: early, as: UTF8.self).contains("<date>0001-01-01T00:00:00Z</date>"))
    }
}

/// One value for a round-trip test, with a readable name.
struct RoundTrip: CustomTestStringConvertible, Sendable {
    let name: String
    let value: PlistValue
    var testDescription: String { name }

    static let samples: [RoundTrip] = [
        RoundTrip(name: "markup and CR in strings", value: .string("a<b>&c\r\nd\re ]]> \"q\" 'a'")),
        RoundTrip(name: "unicode", value: .string("héllo wörld 😀 \u{263A} \t tab")),
        RoundTrip(name: "blank strings", value: .array([.string(""), .string("   "), .string("\n")])),
        RoundTrip(name: "integer extremes", value: .array([.integer(.min), .integer(.max), .integer(0)])),
        RoundTrip(name: "reals", value: .array([
            .real(0.1), .real(-0.0), .real(1e300), .real(-2.5e-300), .real(.infinity), .real(-.infinity),
            .real(Double.leastNonzeroMagnitude), .real(1.2345678901234568e17), .real(3), .real(1e15),
        ])),
        RoundTrip(name: "dates", value: .array([
            .date(Date(timeIntervalSince1970: 1_767_323_045)),
            .date(Date(timeIntervalSinceReferenceDate: 0)),
            .date(Date(timeIntervalSinceReferenceDate: 123)),
            .date(Date(timeIntervalSinceReferenceDate: -1)),
            .date(Date(timeIntervalSinceReferenceDate: -1_000_000_001)),
            .date(Date(timeIntervalSince1970: 951_782_400)),  // 2000-02-29
        ])),
        RoundTrip(name: "data", value: .array([.data([]), .data([0]), .data([1, 2]), .data(Array(0...255))])),
        RoundTrip(name: "booleans", value: .array([.boolean(true), .boolean(false)])),
        RoundTrip(name: "empty containers", value: .array([.array([]), .dictionary(PlistDictionary())])),
        RoundTrip(name: "ContentInfo", value: Fixtures.contentInfo),
        RoundTrip(name: "scalar root", value: .integer(5)),
    ]

    /// A random value tree (deterministic for a seed), with many keys so order matters.
    static func random(_ g: inout SplitMix, depth: Int) -> PlistValue {
        let choice = depth >= 4 ? g.next() % 7 : g.next() % 9
        switch choice {
        case 0: return .string("s\(g.next() % 1000) & <\(g.next() % 10)>")
        case 1: return .integer(Int64(bitPattern: g.next()))
        case 2: return .real(Double(bitPattern: g.next() >> 2))
        case 3: return .boolean(g.next() % 2 == 0)
        case 4: return .date(Date(timeIntervalSinceReferenceDate: Double(Int64(g.next() % 4_000_000_000)) - 2e9))
        case 5: return .data((0..<(g.next() % 40)).map { _ in UInt8(truncatingIfNeeded: g.next()) })
        case 6: return .string("")
        case 7: return .array((0..<(g.next() % 6)).map { _ in random(&g, depth: depth + 1) })
        default:
            var dictionary = PlistDictionary()
            for index in 0..<(g.next() % 8) {
                dictionary["Unknown\(g.next() % 100)_\(index)"] = random(&g, depth: depth + 1)
            }
            return .dictionary(dictionary)
        }
    }
}

/// A tiny deterministic generator, so random tests are reproducible.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Checking an encoded plist without decoding it")
struct CheckEncodedXMLTests {
    @Test("What decodes passes; what decode refuses is refused with decode's error")
    func sameVerdictAsDecode() throws {
        let files = (0..<2_000).map { PlistValue.string("data/item-\($0).json") }
        let good: PlistValue = .dictionary(PlistDictionary([
            .init(key: "Files", value: .array(files)), .init(key: "Nested", value: .dictionary(PlistDictionary([.init(key: "n", value: .integer(3))]))),
        ]))
        try PropertyList.checkEncodedXML(PropertyList.encodeXML(good))

        // U+0001 cannot be carried by XML 1.0: the writer emits it raw, and the parse must catch it.
        let unwritable = PropertyList.encodeXML(.dictionary(PlistDictionary([.init(key: "k", value: .string("a\u{1}b"))])))
        let limits = PlistLimits(maxBytes: 1 << 20, maxDepth: 4, maxObjects: 1_000)
        var failures: [PlistError] = []
        for bytes in [unwritable, PropertyList.encodeXML(good)] {
            let decoded = #expect(throws: PlistError.self) { try PropertyList.decode(bytes, limits: limits) }
            let checked = #expect(throws: PlistError.self) { try PropertyList.checkEncodedXML(bytes, limits: limits) }
            #expect(checked == decoded)
            if let checked { failures.append(checked) }
        }
        #expect(failures.map(\.kind) == [.syntax, .limit])
        let small = PlistLimits(maxBytes: 100)
        #expect(throws: PlistError.self) { try PropertyList.checkEncodedXML(PropertyList.encodeXML(good), limits: small) }
    }
}
