import HostedContent
import Testing

/// Control characters in names: a terminal acts on C0 (ESC) and C1 (CSI U+009B, OSC U+009D) alike, so a Files
/// entry may hold neither, and messages print both escaped.
@Suite("Control characters in names")
struct ControlCharacterTests {
    @Test("a Files entry with a C0, DEL or C1 control character is refused with files.control-character", arguments: [
        "levels/\u{1b}[31m.json", "levels/a\u{7f}.json", "levels/\u{9b}2J.json", "levels/\u{9d}0;title\u{9c}.json",
    ])
    func refused(entry: String) {
        let rules = PackagePath.filesEntryProblems(entry).map(\.0)
        #expect(rules.contains(.filesControlCharacter), "\(rules)")
    }

    @Test("names with letters past U+009F are not control characters")
    func accepted() {
        for entry in ["levels/\u{a0}nbsp.json", "levels/café.json", "levels/日本.json"] {
            #expect(!PackagePath.filesEntryProblems(entry).map(\.0).contains(.filesControlCharacter), "\(entry)")
        }
    }

    @Test("printable escapes C0, DEL and C1, and leaves other text as it is")
    func printable() {
        #expect(PackagePath.printable("a\u{1b}b") == "a\\x1bb")
        #expect(PackagePath.printable("a\u{9b}2J") == "a\\u{009b}2J")
        #expect(PackagePath.printable("café \u{a0}日本") == "café \u{a0}日本")
    }
}
