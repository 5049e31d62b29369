import FileSystemIO
import Foundation
import TestSupport
import Testing

/// `openForUpdate` is how fetch opens a partial download in DIR's bookkeeping folder: what it opens must be
/// the folder's own regular file, or writing would change a file elsewhere.
@Suite("FileSystemIO: files grown in place")
struct UpdatableFileTests {
    @Test("a name with a second hard link is refused on the open descriptor, and the other file keeps its bytes")
    func hardLinkRefused() throws {
        let folder = TemporaryFolder()
        let outside = folder.url("outside.txt")
        folder.write("outside.txt", "the user's file\n")
        try FileManager.default.createDirectory(atPath: folder.url("store"), withIntermediateDirectories: true)
        #expect(link(outside, folder.url("store/d.download")) == 0)
        let store = try DirectoryHandle.open(folder.url("store"))
        #expect(throws: HCPackError.self) { _ = try store.openForUpdate("d.download") }
        #expect(try String(contentsOfFile: outside, encoding: .utf8) == "the user's file\n")
    }

    @Test("a symlink is refused, a new name is created empty, a one-name file opens with its bytes")
    func ordinaryNames() throws {
        let folder = TemporaryFolder()
        folder.write("kept.download", "12345")
        #expect(symlink(folder.url("kept.download"), folder.url("link.download")) == 0)
        let store = try DirectoryHandle.open(folder.path)
        #expect(throws: HCPackError.self) { _ = try store.openForUpdate("link.download") }
        let kept = try store.openForUpdate("kept.download")
        defer { kept.close() }
        #expect(try kept.size() == 5)
        let fresh = try store.openForUpdate("new.download")
        defer { fresh.close() }
        #expect(try fresh.size() == 0)
    }
}
