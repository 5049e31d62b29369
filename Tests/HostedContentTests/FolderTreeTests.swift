@testable import HostedContent
import Testing

@Suite("FolderTree")
struct FolderTreeTests {
    @Test("Every folder above an added path is found, the path itself and its siblings are not")
    func ancestors() {
        var tree = FolderTree()
        tree.addAncestors(of: "Contents/levels/one.json")
        tree.addAncestors(of: "Contents/levels/two.json")
        tree.addAncestors(of: "Contents/levelsX/three.json")
        tree.addAncestors(of: "top.json")
        #expect(tree.contains("Contents"))
        #expect(tree.contains("Contents/levels"))
        #expect(tree.contains("Contents/levelsX"))
        #expect(!tree.contains("Contents/levels/one.json"))
        #expect(!tree.contains("Contents/level"))
        #expect(!tree.contains("top.json"))
        #expect(!tree.contains(""))
        #expect(tree.count == 3)
    }

    @Test("Names compare byte for byte: NFC and NFD spellings are two folders")
    func exactNames() {
        var tree = FolderTree()
        tree.addAncestors(of: "caf\u{e9}/x")
        #expect(tree.contains("caf\u{e9}"))
        #expect(!tree.contains("cafe\u{301}"))
    }

    @Test("A slash followed by a combining mark still separates folders")
    func slashBeforeCombiningMark() {
        var tree = FolderTree()
        tree.addAncestors(of: "a/\u{301}b/c")
        #expect(tree.contains("a"))
        #expect(tree.contains("a/\u{301}b"))
    }

    @Test("The first marked folder above a path is found, outermost first; a mark on a leaf changes nothing")
    func markedAncestor() {
        var tree = FolderTree()
        tree.addAncestors(of: "Contents/link/inner/x")
        tree.addAncestors(of: "Contents/other/y")
        tree.mark("Contents/link/inner")
        tree.mark("Contents/link")
        tree.mark("Contents/other/y")  // not a folder: ignored
        #expect(tree.firstMarkedAncestor(of: "Contents/link/inner/x") == "Contents/link")
        #expect(tree.firstMarkedAncestor(of: "Contents/other/y") == nil)
        #expect(tree.firstMarkedAncestor(of: "Contents/link") == nil)
        #expect(!tree.contains("Contents/other/y"))
    }

    @Test("A path of 200,000 folders is added and found (a set of whole prefixes hashed 20 GB for it)")
    func longPath() {
        let path = String(repeating: "a/", count: 200_000) + "x"
        var tree = FolderTree()
        tree.addAncestors(of: path)
        #expect(tree.count == 200_000)
        #expect(tree.contains(String(path.dropLast(2))))
        tree.mark("a/a")
        #expect(tree.firstMarkedAncestor(of: path) == "a/a")
    }
}
