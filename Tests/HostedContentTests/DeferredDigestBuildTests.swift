import ArchiveIO
import Digest
import Foundation
import TestSupport
import Testing

@testable import HostedContent

/// A package with what a one-pass build must get right: files over several 1 MiB chunks, an empty file, a
/// non-ASCII name, and a file left out of Files (so without a record).
private func writeMixedPackage(in folder: TemporaryFolder, extraKeys: String = "") {
    let listed = sampleFiles + [("empty.txt", ""), ("media/clip.bin", "")]
    writeValidPackage(in: folder, root: "pkg", files: listed, extraKeys: extraKeys)
    // Over three 1 MiB chunks, not a multiple of one.
    folder.write(
        "pkg/Contents/media/clip.bin", (0..<(3 << 20) + 123).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) })
    folder.write("pkg/Contents/unlisted.txt", "in the archive, not in Files\n")
}

/// Builds with `deferring` and returns the plan (before writing) and the archive's bytes.
private func buildStoredZip(
    _ folder: TemporaryFolder, to name: String, deferring: Bool
) throws -> (plan: BuildPlan, bytes: [UInt8], result: BuildResult) {
    let options = BuildOptions(source: folder.url("pkg"), output: folder.url(name), compression: .store)
    var plan = try Builder.prepare(options, deferringDigests: deferring)
    #expect(plan.isValid, "\(plan.report.problems.problems)")
    let planned = plan
    plan.releaseCheckedContents()
    let result = try Builder.write(plan, options: options)
    return (planned, try #require(folder.read(name)), result)
}

@Suite("build: a stored zip hashed while it is written")
struct DeferredDigestBuildTests {
    @Test("Hashing while writing gives the two-pass build's bytes, digest and a valid package")
    func sameBytesAsTwoPasses() throws {
        let folder = TemporaryFolder()
        writeMixedPackage(in: folder)
        let onePass = try buildStoredZip(folder, to: "one.zip", deferring: true)
        let twoPass = try buildStoredZip(folder, to: "two.zip", deferring: false)
        #expect(onePass.plan.digestsPending)
        #expect(!twoPass.plan.digestsPending)
        #expect(onePass.bytes == twoPass.bytes)
        #expect(onePass.result.sha256 == Digest.Hasher.digest(.sha256, of: onePass.bytes).hexString)
        #expect(onePass.result.sha256 == twoPass.result.sha256)

        let report = try Verifier.verify(folder.url("one.zip"))
        #expect(report.isValid(), "\(report.problems.problems)")
        let records = try #require(report.contentInfo?.integrity)
        #expect(records.count == sampleFiles.count + 2)  // the unlisted file has none
        let clip = try #require(folder.read("pkg/Contents/media/clip.bin"))
        #expect(
            records["media/clip.bin"]
                == FileRecord(size: Int64(clip.count), sha256: Digest.Hasher.digest(.sha256, of: clip).hexString))
        #expect(records["empty.txt"]?.sha256 == Digest.Hasher.digest(.sha256, of: []).hexString)
    }

    @Test("An independent unzip checks every CRC-32, the plist's included")
    func independentExtractorAgrees() throws {
        let folder = TemporaryFolder()
        writeMixedPackage(in: folder)
        _ = try buildStoredZip(folder, to: "one.zip", deferring: true)
        let tested = run("unzip", ["-t", folder.url("one.zip")])
        #expect(tested.status == 0, "\(tested.output)")
        #expect(tested.output.contains("No errors"))
        let plist = try ContentInfo.decode(
            try #require(builtFiles(folder.url("one.zip"), format: .zip, scratch: folder)["ContentInfo.plist"]))
        #expect(plist.integrity?["unlisted.txt"] == nil)
        #expect(
            plist.integrity?["levels/1.json"]?.sha256
                == Digest.Hasher.digest(.sha256, of: Array("{\"level\": 1}\n".utf8)).hexString)
    }

    @Test(
        "Only a stored zip defers its digests",
        arguments: [
            (BuildFormat.zip, CompressionPolicy.store, true), (.zip, .auto, false), (.zip, .deflate, false),
            (.tarGzip, .store, false),
            (.directory, .store, false),
        ])
    func onlyStoredZip(_ format: BuildFormat, _ compression: CompressionPolicy, _ defers: Bool) throws {
        let folder = TemporaryFolder()
        writeMixedPackage(in: folder)
        let options = BuildOptions(
            source: folder.url("pkg"), output: folder.url(outputName(format)), format: format, compression: compression)
        let plan = try Builder.prepare(options, deferringDigests: true)
        #expect(plan.digestsPending == defers)
        // Pending or not, the planned plist records sizes for the same files.
        #expect(plan.contentInfo?.integrity?.count == sampleFiles.count + 2)
        _ = try Builder.write(plan, options: options)
        let report = try Verifier.verify(folder.url(outputName(format)))
        #expect(report.isValid(), "\(report.problems.problems)")
    }

    @Test("A source plist that already holds the zeros is hashed first, with the same archive")
    func zerosInSourcePlist() throws {
        let folder = TemporaryFolder()
        writeMixedPackage(in: folder, extraKeys: "<key>Reserved</key><string>\(Builder.pendingDigest)</string>")
        let onePass = try buildStoredZip(folder, to: "one.zip", deferring: true)
        let twoPass = try buildStoredZip(folder, to: "two.zip", deferring: false)
        #expect(!onePass.plan.digestsPending)
        #expect(onePass.plan.contentInfo?.integrity?["index.json"]?.sha256 != Builder.pendingDigest)
        #expect(onePass.bytes == twoPass.bytes)
        let report = try Verifier.verify(folder.url("one.zip"))
        #expect(report.isValid(), "\(report.problems.problems)")
    }

    @Test("prepare starts the hashing; a second write of the same plan hashes again and gives the same bytes")
    func planWrittenTwice() throws {
        let folder = TemporaryFolder()
        writeMixedPackage(in: folder)
        let first = BuildOptions(source: folder.url("pkg"), output: folder.url("a.zip"), compression: .store)
        let plan = try Builder.prepare(first, deferringDigests: true)
        #expect(plan.sourceHashing != nil)
        _ = try Builder.write(plan, options: first)
        var second = first
        second.output = folder.url("b.zip")
        var again = plan
        again.output = folder.url("b.zip")
        let result = try Builder.write(again, options: second)
        let bytes = try #require(folder.read("b.zip"))
        #expect(bytes == folder.read("a.zip"))
        #expect(result.sha256 == Digest.Hasher.digest(.sha256, of: bytes).hexString)
        #expect(try Verifier.verify(folder.url("b.zip")).isValid())
    }

    @Test("A file changed after the plan fails the build, and nothing is written")
    func changedAfterPlan() throws {
        let folder = TemporaryFolder()
        writeMixedPackage(in: folder)
        folder.makeFolder("out")
        let options = BuildOptions(source: folder.url("pkg"), output: folder.url("out/one.zip"), compression: .store)
        let plan = try Builder.prepare(options, deferringDigests: true)
        #expect(plan.digestsPending)
        folder.write("pkg/Contents/levels/2.json", "{\"level\": 9}\n")  // same size, other bytes
        let error = #expect(throws: HCPackError.self) { try Builder.write(plan, options: options) }
        #expect(error?.message.contains("levels/2.json changed") == true, "\(String(describing: error))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url("out")).isEmpty)
    }
}

@Suite("build: the final plist, filled a window at a time")
struct FilledReservationTests {
    @Test("A filled reservation gives the same bytes whatever the windows, slots split across them included")
    func filledReservationWindows() {
        let reserved = [UInt8](repeating: UInt8(ascii: "0"), count: 300)
        let digests = (0..<96).map { UInt8($0 * 7 % 256) }
        let filled = FilledReservation(reserved: reserved, slots: [0, 100, 236], digests: digests)
        var whole = reserved
        for (index, slot) in [0, 100, 236].enumerated() {
            whole.replaceSubrange(slot..<(slot + 64), with: Array(digests[(32 * index)..<(32 * index + 32)].hexString.utf8))
        }
        #expect(filled.bytes(0..<300) == whole)
        for cuts in [[0, 130, 300], [0, 1, 99, 164, 165, 260, 300], Array(stride(from: 0, to: 300, by: 7)) + [300]] {
            let pieces = zip(cuts, cuts.dropFirst()).flatMap { filled.bytes($0..<$1) }
            #expect(pieces == whole, "\(cuts)")
        }
    }
}
