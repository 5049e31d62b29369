import HostedContent
import TestSupport
import Testing

@Suite("ContentVersion")
struct ContentVersionTests {
    @Test("Valid versions parse", arguments: ["1", "1.0", "2.10.3", "0.0.1", "10"])
    func valid(_ text: String) { #expect(ContentVersion(text) != nil) }

    @Test("Malformed versions are refused", arguments: ["", "1.", ".1", "1..2", "v1", "1.0-beta", " 1", "1.2.x", "١"])
    func invalid(_ text: String) { #expect(ContentVersion(text) == nil) }

    @Test("Versions compare numerically, trailing zeros ignored")
    func ordering() throws {
        let v = { (text: String) throws -> ContentVersion in try #require(ContentVersion(text)) }
        #expect(try v("1.10") > v("1.9"))
        #expect(try v("1.0") == v("1"))
        #expect(try v("2") > v("1.99.99"))
        #expect(try v("1.0.1") > v("1"))
    }
}
