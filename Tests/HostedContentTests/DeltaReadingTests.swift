import Foundation
import PropertyList
import TestSupport
import Testing

@testable import HostedContent

/// Two versions of 12 changed files of about 20 KB (patched) and one unchanged, built as zips and as folders.
private struct TwelveChanged {
    let folder = TemporaryFolder()

    /// OLD's files are 20,000 bytes, NEW's 20,100: with a memory budget between their sums, OLD keeps one
    /// file more in memory than NEW, and the patch of that file is made from one copy in memory and one staged.
    static func text(_ index: Int, edited: Bool) -> String {
        let line = (0..<40).map { "{\"id\": \($0), \"level\": \(index), \"score\": \($0 * 7)}" }.joined(separator: ",\n")
        let body = String(repeating: line + ",\n", count: 20)
        let base = String(body.prefix(20_000))
        guard edited else { return base }
        let middle = base.index(base.startIndex, offsetBy: 10_000)
        return String(base[..<middle]) + String(repeating: "x", count: 100) + String(base[middle...])
    }

    func build(_ version: String, edited: Bool, format: BuildFormat) throws -> String {
        let source = "src-\(version)"
        if !FileManager.default.fileExists(atPath: folder.url(source)) {
            let files = (0..<12).map { ("levels/\($0).json", Self.text($0, edited: edited)) } + [("same.txt", "same\n")]
            writeValidPackage(in: folder, root: source, files: files)
            folder.write(
                source + "/ContentInfo.plist",
                plistXML(
                    """
                    <key>IAPProductIdentifier</key><string>com.example.levels</string>
                    <key>ContentVersion</key><string>\(version)</string>
                    \(filesXML(files.map(\.0)))
                    """))
        }
        let output = folder.url("v\(version)" + format.fileExtension)
        let plan = try Builder.prepare(BuildOptions(source: folder.url(source), output: output, format: format))
        #expect(plan.isValid)
        _ = try Builder.write(plan, options: BuildOptions(source: folder.url(source), output: output, format: format))
        return output
    }
}

@Suite("delta: reading only what the delta is made of")
struct DeltaReadingTests {
    @Test("Any memory budget gives the same delta as reading folders: patches made in memory, from staged files, or from one of each")
    func budgets() throws {
        let corpus = TwelveChanged()
        let oldZip = try corpus.build("1.0", edited: false, format: .zip)
        let newZip = try corpus.build("1.1", edited: true, format: .zip)
        let oldFolder = try corpus.build("1.0", edited: false, format: .directory)
        let newFolder = try corpus.build("1.1", edited: true, format: .directory)

        func delta(_ old: String, _ new: String, budget: Int64? = nil, name: String) throws -> [UInt8] {
            var options = DeltaOptions(old: old, new: new, output: corpus.folder.url(name))
            if let budget { options.memoryBudgetBytes = budget }
            let result = try DeltaBuilder.build(options)
            #expect(result.patched.count == 12, "\(name): \(result.patched.map(\.path))")
            return try #require(corpus.folder.read(name))
        }
        let fromFolders = try delta(oldFolder, newFolder, name: "folders.zip")
        // All in memory; none; and a budget OLD's copies fill one file later than NEW's.
        for budget: Int64 in [64 << 20, 0, 100_050] {
            let fromArchives = try delta(oldZip, newZip, budget: budget, name: "archives-\(budget).zip")
            let same = fromArchives == fromFolders
            #expect(same, "budget \(budget)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: corpus.folder.path).allSatisfy { !$0.hasPrefix(".") })
    }

    @Test("A delta of small files built from memory is the one built from its scratch folder: patches, new and whole files, folders")
    func memoryBuild() throws {
        let folder = TemporaryFolder()
        // 6 patched, one rewritten through (whole: no patch saves), one new, one removed, one unchanged; and a
        // second NEW with a new file over PreparedEntries.largestFile, which keeps the folder.
        var random = SystemRandomNumberGenerator()
        let noise = String((0..<1_500).map { _ in Character(Unicode.Scalar(UInt8.random(in: 97...122, using: &random))) })
        let big = String(repeating: "0123456789abcdef", count: 5_000)
        let old = (0..<6).map { ("levels/\($0).json", TwelveChanged.text($0, edited: false)) }
            + [("levels/6.json", "short\n"), ("gone.txt", "gone\n"), ("same.txt", "same\n")]
        let new = (0..<6).map { ("levels/\($0).json", TwelveChanged.text($0, edited: true)) }
            + [("levels/6.json", noise), ("extra/new.txt", "new\n"), ("same.txt", "same\n")]
        func build(_ name: String, _ version: String, _ files: [(String, String)]) throws -> String {
            writeValidPackage(in: folder, root: name, files: files)
            folder.write(
                name + "/ContentInfo.plist",
                plistXML(
                    """
                    <key>IAPProductIdentifier</key><string>com.example.levels</string>
                    <key>ContentVersion</key><string>\(version)</string>
                    \(filesXML(files.map(\.0)))
                    """))
            let options = BuildOptions(source: folder.url(name), output: folder.url(name + ".zip"))
            _ = try Builder.write(try Builder.prepare(options), options: options)
            return folder.url(name + ".zip")
        }
        let oldZip = try build("old", "1.0", old)
        let newZip = try build("new", "1.1", new)
        let bigZip = try build("big", "1.1", new + [("extra/big.txt", big)])
        func delta(_ new: String, inMemory: Bool, name: String) throws -> (bytes: [UInt8], result: DeltaResult) {
            var options = DeltaOptions(old: oldZip, new: new, output: folder.url(name))
            options.buildsInMemory = inMemory
            let result = try DeltaBuilder.build(options)
            return (try #require(folder.read(name)), result)
        }
        let memory = try delta(newZip, inMemory: true, name: "memory.zip")
        let scratch = try delta(newZip, inMemory: false, name: "scratch.zip")
        #expect(memory.result.builtFromMemory)
        #expect(!scratch.result.builtFromMemory)
        #expect(memory.result.patched.count == 6 && memory.result.patched == scratch.result.patched)
        #expect(memory.result.carried.sorted() == ["extra/new.txt", "levels/0.json", "levels/1.json", "levels/2.json", "levels/3.json", "levels/4.json", "levels/5.json", "levels/6.json"])
        #expect(memory.bytes == scratch.bytes)
        let large = try delta(bigZip, inMemory: true, name: "large.zip")
        #expect(!large.result.builtFromMemory)
        #expect(large.bytes == (try delta(bigZip, inMemory: false, name: "large-scratch.zip")).bytes)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).allSatisfy { !$0.hasPrefix(".") })
    }

    @Test("A staging area holds in memory only the files it was told, up to 1 MiB each and its budget in all")
    func keptBudget() throws {
        let folder = TemporaryFolder()
        folder.makeFolder("stage")
        let staging = try StagingArea(in: DirectoryHandle.open(folder.url("stage")))
        staging.keptBudgetBytes = 3_000
        staging.keptNames = { _, _ in ["Contents/a", "Contents/b", "Contents/c", "Contents/big"] }
        staging.plistRead("ContentInfo.plist", [])
        #expect(staging.keepsInMemory("Contents/a", declaredSize: 1_000))
        #expect(!staging.keepsInMemory("Contents/other", declaredSize: 10))
        #expect(!staging.keepsInMemory("Contents/big", declaredSize: StagingArea.largestKeptBytes + 1))
        #expect(!staging.keepsInMemory("Contents/b", declaredSize: nil))
        #expect(staging.keepsInMemory("Contents/b", declaredSize: 2_000))
        #expect(!staging.keepsInMemory("Contents/c", declaredSize: 1))
    }
}
