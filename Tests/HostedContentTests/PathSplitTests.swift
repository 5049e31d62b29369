@testable import HostedContent
import Testing

@Suite("Paths split over bytes, as by Characters")
struct PathSplitTests {
    @Test("An archive's top-level name is its first Character-wise component, whatever the bytes around the slash")
    func topLevelName() {
        let paths = [
            "Contents/a.json", "ContentInfo.plist", "", "/x", "a/", "pkg/Contents/x", "a/\u{301}b/c", "\u{600}/x",
            "caf\u{e9}/x", "a\u{301}/x", "a\r/x", "\r\n/x", "x/\u{e9}",
        ]
        for path in paths {
            #expect(ArchiveCollector.topLevelName(path) == String(path.prefix(while: { $0 != "/" })), "\(Array(path.utf8))")
        }
    }

    @Test("Install's first component of a path is split's, for plain ASCII paths and the rest")
    func firstComponent() {
        let paths = [
            ".hcpack/x", "a/b/c", "a", "", "/", "/.hcpack/x", "a//b", "./a", "caf\u{e9}/x", "a/\u{301}b", "\u{301}/x", "a\\b/c",
        ]
        for path in paths {
            #expect(InstallSession.firstComponent(of: path) == path.split(separator: "/").first, "\(Array(path.utf8))")
        }
    }
}
