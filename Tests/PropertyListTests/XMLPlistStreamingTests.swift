import Foundation
import Testing
@testable import PropertyList

/// The SAX reader builds values while libxml2 parses: text arrives in pieces, errors are found mid-document.
@Suite("XML property list streaming")
struct XMLPlistStreamingTests {
    @Test("text split by entities, character references, CDATA, comments and PIs is joined in order")
    func splitText() throws {
        var body = ""
        var expected = ""
        for index in 0..<500 {
            body += "part \(index) &amp; &lt;&#x263A;<![CDATA[<raw & \(index)>]]><!-- gone --><?pi gone?>\t"
            expected += "part \(index) & <\u{263A}<raw & \(index)>\t"
        }
        let bytes = Fixtures.plist("""
            <dict>
            <key>a&amp;b<!-- c -->c</key><string>\(body)</string>
            <key>n</key><integer>1&#50;<!-- x -->3</integer>
            <key>d</key><data>AA&#10;EC<![CDATA[/w==]]></data>
            </dict>
            """)
        let value = try PropertyList.decode(bytes).value
        #expect(value == .dictionary(PlistDictionary([
            .init(key: "a&bc", value: .string(expected)), .init(key: "n", value: .integer(123)),
            .init(key: "d", value: .data([0, 1, 2, 0xFF])),
        ])))
    }

    @Test("blanks, comments, PIs and blank CDATA between elements are skipped; other text is refused at its line")
    func textBetweenElements() throws {
        let fine = Fixtures.plist("<array> <!-- c --> <?pi x?>\n<![CDATA[ \t ]]> &#32; <true/>\n</array>")
        #expect(try PropertyList.decode(fine).value == .array([.boolean(true)]))

        let cdata = try #require(Fixtures.error(Fixtures.plist("<array>\n<![CDATA[x]]></array>")))
        #expect(cdata.kind == .syntax)
        #expect(cdata.message == "unexpected text inside <array>")
        #expect(cdata.line == 5)

        // The line libxml2 has reached once the run of text is read, as a tree text node had it.
        let loose = try #require(Fixtures.error(Fixtures.plist("<dict>\n<key>a</key>\n<true/>\nloose\n</dict>")))
        #expect(loose.message == "unexpected text inside <dict>")
        #expect(loose.line == 8)
    }

    @Test("a limit stops the parser where it is exceeded: the broken rest of the document is never read")
    func limitsStopAtOnce() throws {
        let deep = Fixtures.plist(String(repeating: "<array>\n", count: 70) + "</broken")
        let depth = try #require(Fixtures.error(deep))
        #expect(depth.kind == .limit)
        #expect(depth.message == "nesting deeper than the limit of 64")
        #expect(depth.line == 4 + 64)

        // The array (line 4) is value 1, so value 51 is the 50th <true/>, on line 54.
        let many = Fixtures.plist("<array>\n" + String(repeating: "<true/>\n", count: 100) + "</wrong>")
        let count = try #require(Fixtures.error(many, limits: PlistLimits(maxObjects: 50)))
        #expect(count.kind == .limit)
        #expect(count.message == "more than 50 values")
        #expect(count.line == 54)
    }

    @Test("half a million values against a limit of 1,000 are refused at the first one too many")
    func hugeObjectCount() throws {
        let bytes = Fixtures.plist("<array>" + String(repeating: "<string>x</string>", count: 500_000) + "<broken")
        let error = try #require(Fixtures.error(bytes, limits: PlistLimits(maxObjects: 1_000)))
        #expect(error.kind == .limit)
        #expect(error.message == "more than 1000 values")
    }

    @Test("elements that are no plist value cannot nest without end either")
    func deepUnknownElements() throws {
        let text = "<plist>" + String(repeating: "<x>", count: 200) + String(repeating: "</x>", count: 200) + "</plist>"
        let error = try #require(Fixtures.error(Fixtures.utf8(text)))
        #expect(error.kind == .limit)
    }

    @Test("libxml2's errors come before plist errors found earlier in the document, as with the tree")
    func xmlErrorsFirst() throws {
        let plistError = try #require(Fixtures.error(Fixtures.plist("<array>\n<integer>x</integer>\n</array>")))
        #expect(plistError.message == "<integer> 'x' is not a 64-bit integer")
        #expect(plistError.line == 5)

        let both = Fixtures.plist("<array>\n<integer>x</integer>\n<string>y</strin>\n</array>")
        let xmlError = try #require(Fixtures.error(both))
        #expect(xmlError.kind == .syntax)
        #expect(xmlError.message.hasPrefix("XML: "))
        #expect(xmlError.line == 6)
        #expect(xmlError.column != nil)
    }

    @Test("of two plist errors, the first in the document is reported")
    func documentOrder() throws {
        let error = try #require(Fixtures.error(Fixtures.plist("<integer>x</integer>\n<string>b</string>")))
        #expect(error.message == "<integer> 'x' is not a 64-bit integer")
        #expect(error.line == 4)
    }

    @Test("<plist> with several values says how many, at the <plist> line")
    func surplusValues() throws {
        let error = try #require(Fixtures.error(Fixtures.plist("<string>a</string>\n<array><x/></array>\n<true/>")))
        #expect(error.kind == .syntax)
        #expect(error.message == "<plist> must hold exactly one value, found 3")
        #expect(error.line == 3)
        let text = try #require(Fixtures.error(Fixtures.plist("<string>a</string>\n<true/>\ntext")))
        #expect(text.message == "unexpected text inside <plist>")
    }

    @Test("misplaced, prefixed and nested elements are named in the error", arguments: [
        ("<dict>\n<key>a</key>\n<key>b</key>\n<true/>\n</dict>", "unexpected element <key>", 6),
        ("<dict>\n<key><b/></key>\n<true/>\n</dict>", "unexpected element <b> inside <key>", 5),
        ("<dict>\n<string>a</string>\n</dict>", "expected <key> in <dict>, found <string>", 5),
        ("<dict>\n<key>a</key>\n</dict>", "<key>a</key> has no value", 5),
        ("<array>\n<x:string>a</x:string>\n</array>", "unexpected element <x:string>", 5),
        ("<array>\n<string xmlns=\"urn:x\">a</string>\n</array>", "unexpected element <string>", 5),
        ("<array>\n<plist/>\n</array>", "unexpected element <plist>", 5),
        ("<integer/>", "<integer> '' is not a 64-bit integer", 4),
    ])
    func misplacedElements(body: String, message: String, line: Int) throws {
        let error = try #require(Fixtures.error(Fixtures.plist(body)))
        #expect(error.kind == .syntax)
        #expect(error.message == message)
        #expect(error.line == line)
    }

    @Test("a duplicate key is reported at its line even after a long dictionary")
    func lateDuplicate() throws {
        var body = "<dict>\n"
        for index in 0..<100 { body += "<key>k\(index)</key><integer>\(index)</integer>\n" }
        body += "<key>k7</key><true/>\n</dict>"
        let error = try #require(Fixtures.error(Fixtures.plist(body)))
        #expect(error.kind == .duplicateKey)
        #expect(error.message == "duplicate key 'k7' in <dict>")
        #expect(error.line == 105)
    }

    @Test("line numbers past 65,535 are exact")
    func bigLines() throws {
        let body = "<array>\n" + String(repeating: "<string>f</string>\n", count: 70_000) + "<integer>x</integer>\n</array>"
        let error = try #require(Fixtures.error(Fixtures.plist(body)))
        #expect(error.message == "<integer> 'x' is not a 64-bit integer")
        #expect(error.line == 70_005)
    }

    @Test("26,000 listed files with integrity records round-trip through the writer and the reader")
    func largeFilesList() throws {
        let count = 26_000
        var files: [PlistValue] = []
        var integrity = PlistDictionary()
        for index in 0..<count {
            let path = "data/level-\(index % 30)/chapter-\(index / 30 % 10)/entry & \(index).json"
            files.append(.string(path))
            integrity[path] = .dictionary(PlistDictionary([
                .init(key: "Size", value: .integer(Int64(index * 37))),
                .init(key: "SHA256", value: .string(String(repeating: String(index % 16, radix: 16), count: 64))),
            ]))
        }
        let value: PlistValue = .dictionary(PlistDictionary([
            .init(key: "IAPProductIdentifier", value: .string("com.example.big")),
            .init(key: "ContentVersion", value: .string("1.0")),
            .init(key: "Files", value: .array(files)),
            .init(key: "HCPackIntegrity", value: .dictionary(integrity)),
        ]))
        let bytes = PropertyList.encodeXML(value)
        let decoded = try PropertyList.decode(bytes).value
        #expect(decoded == value)
        guard case .dictionary(let root) = decoded, case .dictionary(let records)? = root["HCPackIntegrity"] else {
            Issue.record("no HCPackIntegrity dictionary")
            return
        }
        #expect(records.entries.count == count)
        #expect(records["data/level-5/chapter-3/entry & 12095.json"] != nil)
    }

    @Test("a document over 10 MB, libxml2's lookup limit for input read through a callback, is read whole")
    func overTenMegabytes() throws {
        let strings = (0..<300_000).map { PlistValue.string("entry-\($0)-" + String(repeating: "x", count: 30)) }
        let value: PlistValue = .dictionary(PlistDictionary([.init(key: "Junk", value: .array(strings))]))
        let bytes = PropertyList.encodeXML(value)
        #expect(bytes.count > 12 << 20)
        #expect(try PropertyList.decode(bytes, limits: PlistLimits(maxBytes: 64 << 20)).value == value)
    }
}
