import Foundation
import Testing
@testable import PropertyList

@Suite("XML property list reading")
struct XMLPlistReaderTests {
    @Test("a realistic ContentInfo.plist decodes with keys in document order")
    func contentInfo() throws {
        let (value, format) = try PropertyList.decode(Fixtures.utf8(Fixtures.contentInfoXML))
        #expect(format == .xml)
        #expect(value == Fixtures.contentInfo)
        guard case .dictionary(let dictionary) = value else { Issue.record("not a dictionary"); return }
        #expect(dictionary.keys == ["IAPProductIdentifier", "ContentVersion", "Files", "XVendorExtras"])
    }

    @Test("every value type decodes")
    func everyType() throws {
        let bytes = Fixtures.plist("""
            <array>
            \t<string>a &amp; b &lt;c&gt; &#x263A; &#65;</string>
            \t<string><![CDATA[<raw> & text]]></string>
            \t<string>  padded\t</string>
            \t<string/>
            \t<integer>-17</integer>
            \t<integer> +0x1F </integer>
            \t<integer>9223372036854775807</integer>
            \t<integer>-9223372036854775808</integer>
            \t<real>1.5</real>
            \t<real>-2.5e3</real>
            \t<real>inf</real>
            \t<real>-infinity</real>
            \t<true/>
            \t<false/>
            \t<date>2026-01-02T03:04:05Z</date>
            \t<data>
            \tAAEC
            \t/w==
            \t</data>
            \t<array/>
            \t<dict/>
            \t<!-- comments are ignored -->
            </array>
            """)
        let (value, _) = try PropertyList.decode(bytes)
        let expected: PlistValue = .array([
            .string("a & b <c> \u{263A} A"), .string("<raw> & text"), .string("  padded\t"), .string(""),
            .integer(-17), .integer(31), .integer(.max), .integer(.min),
            .real(1.5), .real(-2500), .real(.infinity), .real(-.infinity),
            .boolean(true), .boolean(false),
            .date(Date(timeIntervalSince1970: 1_767_323_045)),
            .data([0, 1, 2, 0xFF]),
            .array([]), .dictionary(PlistDictionary()),
        ])
        #expect(value == expected)
    }

    @Test("nan decodes to a NaN real")
    func nan() throws {
        let (value, _) = try PropertyList.decode(Fixtures.plist("<real>nan</real>"))
        guard case .real(let real) = value else { Issue.record("not a real: \(value)"); return }
        #expect(real.isNaN)
    }

    @Test("integers that overflow 64 bits or are not numbers are syntax errors", arguments: [
        "9223372036854775808", "-9223372036854775809", "0x10000000000000000", "12abc", "", "--1", "0x",
    ])
    func badInteger(text: String) throws {
        let error = try #require(Fixtures.error(Fixtures.plist("<integer>\(text)</integer>")))
        #expect(error.kind == .syntax)
        #expect(error.line == 4)
    }

    @Test("malformed scalars are syntax errors", arguments: [
        "<real>1.2.3x</real>", "<real>0x1p3</real>", "<date>2026-02-30T00:00:00Z</date>", "<date>yesterday</date>",
        "<date>2026-01-02 03:04:05Z</date>", "<data>!!!!</data>", "<data>A</data>", "<true>yes</true>",
        "<string><b/></string>",
    ])
    func badScalar(body: String) throws {
        let error = try #require(Fixtures.error(Fixtures.plist(body)))
        #expect(error.kind == .syntax)
        #expect(error.line == 4)
    }

    @Test("a mismatched tag reports libxml2's line and column")
    func mismatchedTag() throws {
        let text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0">
            <dict>
            \t<key>ContentVersion</key>
            \t<string>1.0</strin>
            </dict>
            </plist>
            """
        let error = try #require(Fixtures.error(Fixtures.utf8(text)))
        #expect(error.kind == .syntax)
        #expect(error.line == 5)
        let column = try #require(error.column)
        #expect(column > 1 && column < 30)
        #expect(error.description.hasPrefix("line 5, column \(column): "))
    }

    @Test("leading blanks and a UTF-8 BOM before <?xml are accepted and lines still count from the file start")
    func bomAndBlanks() throws {
        let good = [0xEF, 0xBB, 0xBF] + Fixtures.utf8("\n\n  ") + Fixtures.plist("<string>x</string>")
        #expect(try PropertyList.decode(good).value == .string("x"))
        let bad = Fixtures.utf8("\n\n") + Fixtures.plist("<integer>x</integer>")
        #expect(Fixtures.error(bad)?.line == 6)
    }

    @Test("an element that is not a plist value is a syntax error with its line")
    func unknownElement() throws {
        let error = try #require(Fixtures.error(Fixtures.plist("<dict>\n<key>a</key>\n<set/>\n</dict>")))
        #expect(error.kind == .syntax)
        #expect(error.line == 6)
        #expect(error.message.contains("<set>"))
    }

    @Test("documents that are not a single plist value are refused", arguments: [
        "<?xml version=\"1.0\"?><html><string>x</string></html>",
        "<plist><string>a</string><string>b</string></plist>",
        "<plist></plist>",
        "<plist><dict><key>a</key></dict></plist>",
        "<plist><dict><string>a</string><string>b</string></dict></plist>",
        "<plist><array>loose text</array></plist>",
        "<plist xmlns:x=\"urn:x\"><x:string>a</x:string></plist>",
    ])
    func wrongShape(text: String) throws {
        let error = try #require(Fixtures.error(Fixtures.utf8(text)))
        #expect(error.kind == .syntax)
        #expect(error.line == 1)
    }

    @Test("a duplicate key is reported with its name and line")
    func duplicateKey() throws {
        let bytes = Fixtures.plist("<dict>\n<key>Files</key><array/>\n<key>Files</key><array/>\n</dict>")
        let error = try #require(Fixtures.error(bytes))
        #expect(error.kind == .duplicateKey)
        #expect(error.message.contains("'Files'"))
        #expect(error.line == 6)
    }

    @Test("10,000 nested arrays are refused quickly as a limit")
    func deepNesting() throws {
        let text = "<plist>" + String(repeating: "<array>", count: 10_000) + String(repeating: "</array>", count: 10_000) + "</plist>"
        let error = try #require(Fixtures.error(Fixtures.utf8(text)))
        #expect(error.kind == .limit)
        // Above libxml2's own limit of 256 levels, its refusal is still reported as a limit.
        let relaxed = PlistLimits(maxDepth: 1_000)
        #expect(Fixtures.error(Fixtures.utf8(text), limits: relaxed)?.kind == .limit)
    }

    @Test("maxDepth counts containers: exactly the limit passes, one more fails")
    func depthBoundary() throws {
        func nested(_ levels: Int) -> [UInt8] {
            Fixtures.plist(String(repeating: "<array>", count: levels) + String(repeating: "</array>", count: levels))
        }
        let limits = PlistLimits(maxDepth: 5)
        #expect(Fixtures.error(nested(5), limits: limits) == nil)
        #expect(Fixtures.error(nested(6), limits: limits)?.kind == .limit)
    }

    @Test("maxObjects and maxBytes are enforced")
    func objectAndByteLimits() throws {
        let bytes = Fixtures.plist("<array>" + String(repeating: "<true/>", count: 20) + "</array>")
        #expect(Fixtures.error(bytes, limits: PlistLimits(maxObjects: 21)) == nil)
        #expect(Fixtures.error(bytes, limits: PlistLimits(maxObjects: 20))?.kind == .limit)
        #expect(Fixtures.error(bytes, limits: PlistLimits(maxBytes: bytes.count - 1))?.kind == .limit)
    }

    @Test("input that is neither XML nor binary is an unknown format")
    func unknownFormat() {
        #expect(Fixtures.error(Fixtures.utf8("{\"json\": true}"))?.kind == .unknownFormat)
        #expect(Fixtures.error([])?.kind == .unknownFormat)
    }
}

@Suite("XML property list hostile input", .serialized)
struct XMLPlistHostileTests {
    /// A temporary file holding a unique secret, removed afterwards.
    struct Secret {
        let directory: URL
        let file: URL
        let text = "SECRET-\(UUID().uuidString)"

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("plist-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            file = directory.appendingPathComponent("secret.txt")
            try Data(text.utf8).write(to: file)
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// Decodes and returns everything the caller could see: the value's text or the error's description.
    func outcome(_ text: String) -> (error: PlistError?, output: String) {
        do {
            let (value, _) = try PropertyList.decode(Fixtures.utf8(text))
            return (nil, "\(value)")
        } catch {
            return (error, error.description)
        }
    }

    @Test("billion laughs is refused as forbidden")
    func billionLaughs() {
        var text = "<?xml version=\"1.0\"?>\n<!DOCTYPE plist [\n<!ENTITY lol0 \"lol\">\n"
        for level in 1...9 {
            text += "<!ENTITY lol\(level) \"" + String(repeating: "&lol\(level - 1);", count: 10) + "\">\n"
        }
        text += "]>\n<plist><string>&lol9;</string></plist>"
        let (error, output) = outcome(text)
        #expect(error?.kind == .forbidden)
        #expect(!output.contains("lollol"))
    }

    @Test("XXE through a SYSTEM entity is refused and the file never appears")
    func xxe() throws {
        let secret = try Secret()
        defer { secret.remove() }
        for url in [secret.file.absoluteString, "file:///etc/passwd"] {
            let text = """
                <?xml version="1.0"?>
                <!DOCTYPE plist [<!ENTITY xxe SYSTEM "\(url)">]>
                <plist><string>&xxe;</string></plist>
                """
            let (error, output) = outcome(text)
            #expect(error?.kind == .forbidden)
            #expect(error?.line == 2)
            #expect(!output.contains(secret.text))
            #expect(!output.contains("root:"))
        }
    }

    @Test("an external DTD with an internal subset is refused")
    func externalDTDWithSubset() throws {
        let secret = try Secret()
        defer { secret.remove() }
        let text = """
            <?xml version="1.0"?>
            <!DOCTYPE plist SYSTEM "http://127.0.0.1:9/evil.dtd" [<!ELEMENT plist ANY>]>
            <plist><string>x</string></plist>
            """
        let (error, _) = outcome(text)
        #expect(error?.kind == .forbidden)
    }

    @Test("an external DTD declaring entities is never loaded, and a reference to its entity is forbidden")
    func externalDTDEntity() throws {
        let secret = try Secret()
        defer { secret.remove() }
        let dtd = secret.directory.appendingPathComponent("evil.dtd")
        try Data("<!ENTITY leak SYSTEM \"\(secret.file.absoluteString)\">".utf8).write(to: dtd)
        let text = """
            <?xml version="1.0"?>
            <!DOCTYPE plist SYSTEM "\(dtd.absoluteString)">
            <plist><string>&leak;</string></plist>
            """
        let (error, output) = outcome(text)
        #expect(error?.kind == .forbidden)
        #expect(!output.contains(secret.text))

        // The same DOCTYPE without a reference parses, and nothing from the file shows up.
        let harmless = outcome(text.replacingOccurrences(of: "&leak;", with: "ok"))
        #expect(harmless.error == nil)
        #expect(harmless.output.contains("ok") && !harmless.output.contains(secret.text))
    }

    @Test("parameter entities are refused")
    func parameterEntities() throws {
        let secret = try Secret()
        defer { secret.remove() }
        let text = """
            <?xml version="1.0"?>
            <!DOCTYPE plist [
            <!ENTITY % file SYSTEM "\(secret.file.absoluteString)">
            <!ENTITY % wrap "<!ENTITY leak '%file;'>">
            %wrap;
            ]>
            <plist><string>&leak;</string></plist>
            """
        let (error, output) = outcome(text)
        #expect(error?.kind == .forbidden)
        #expect(!output.contains(secret.text))
    }

    @Test("an undeclared entity reference is forbidden, with or without Apple's DOCTYPE")
    func entityReference() {
        let withDoctype = outcome(String(decoding: Fixtures.plist("<string>&custom;</string>"), as: UTF8.self))
        #expect(withDoctype.error?.kind == .forbidden)
        #expect(withDoctype.error?.message.contains("custom") == true)
        let bare = outcome("<plist><string>&custom;</string></plist>")
        #expect(bare.error?.kind == .forbidden)
    }

    @Test("Apple's standard DOCTYPE is accepted without fetching it")
    func standardDoctype() throws {
        let (value, _) = try PropertyList.decode(Fixtures.plist("<string>fine</string>"))
        #expect(value == .string("fine"))
    }
}
