import Foundation
@testable import HostedContent
import Testing
import TestSupport

/// The ways big packages are kept out of memory must not change what is written or reported.
@Suite("Memory savings keep the output")
struct LeanMemoryTests {
    @Test("A receipt written in chunks is the encoded receipt, cut at about 64 KiB")
    func receiptChunks() throws {
        let files = (0..<3_000).map { InstalledFile(path: "data/level-\($0 % 9)/item-\($0).json", size: Int64($0), sha256: String(repeating: "ab", count: 32)) }
        let receipt = InstallReceipt(productIdentifier: "com.example.big", version: "3.1", files: files)
        var chunks: [[UInt8]] = []
        receipt.write { chunks.append($0) }
        #expect(chunks.count > 3)
        #expect(chunks.dropLast().allSatisfy { $0.count >= JSONCoding.chunkSize && $0.count < JSONCoding.chunkSize + 512 })
        #expect(Array(chunks.joined()) == receipt.encoded())
        #expect(InstallReceipt.decode(Array(chunks.joined())) == receipt)
    }

    @Test("PackagePath.joined is folder + \"/\" + name, for ASCII and non-ASCII names")
    func joinedPaths() {
        for (folder, name) in [("Contents", "a.json"), ("données/niveau", "café\u{301}.png"), ("x", ""), ("🙂", "🙃")] {
            let joined = PackagePath.joined(folder, name)
            #expect(joined == folder + "/" + name)
            #expect(Array(joined.utf8) == Array((folder + "/" + name).utf8))
        }
    }

    @Test("A plan that released its checked contents writes the same archive, and keeps identity and problems")
    func releasedPlanWritesTheSame() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        folder.write("pkg/Contents/.DS_Store", "junk")
        var outputs: [[UInt8]] = []
        for release in [false, true] {
            let options = BuildOptions(source: folder.url("pkg"), output: folder.url("out-\(release).zip"), sourceDateEpoch: 1_700_000_000)
            var plan = try Builder.prepare(options)
            let problems = plan.report.problems
            if release {
                plan.releaseCheckedContents()
                #expect(plan.report.snapshot.entries.isEmpty && plan.report.contentInfo == nil)
                #expect(plan.contentInfo?.dictionary.keys == [ContentInfo.productIdentifierKey, ContentInfo.contentVersionKey])
                #expect(plan.report.problems == problems)
            }
            let result = try Builder.write(plan, options: options)
            #expect(result.productIdentifier == "com.example.levels" && result.problems == problems)
            outputs.append(try #require(folder.read("out-\(release).zip")))
        }
        #expect(outputs[0] == outputs[1])
    }
}
