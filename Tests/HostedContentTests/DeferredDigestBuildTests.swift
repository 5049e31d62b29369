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

    @Test("An independent unzip checks every CRC-32, the plist's rewritten one included")
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

@Suite("build: rewriting a zip's first entry")
struct ZipEntryRewriteTests {
    @Test("CRC-32 of the standard check string")
    func checkValue() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([]) == 0)
    }

    @Test(
        "The rewritten entry and central record extract with matching CRC-32s; a wrong reservation is refused and changes nothing"
    )
    func rewrite() throws {
        let folder = TemporaryFolder()
        writeMixedPackage(in: folder)
        let built = try buildStoredZip(folder, to: "a.zip", deferring: false)
        let plist = try #require(builtFiles(folder.url("a.zip"), format: .zip, scratch: folder)["ContentInfo.plist"])
        let slot = plist.count - 100
        let filled = FilledReservation(reserved: plist, slots: [slot], digests: [UInt8](repeating: 0xAB, count: 32))
        var final = plist
        final.replaceSubrange(slot..<(slot + 64), with: Array(String(repeating: "ab", count: 32).utf8))
        let (reservedCRC, finalCRC) = (CRC32.checksum(plist), CRC32.checksum(final))
        #expect(filled.checksum() == finalCRC)

        let descriptor = open(folder.url("a.zip"), O_RDWR | O_CLOEXEC)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        var wrong = plist
        wrong[0] ^= 1
        let misreserved = FilledReservation(reserved: wrong, slots: [slot], digests: filled.digests)
        for (name, reservation) in [("ContentInfo.plist", misreserved), ("Other.plist", filled)] {
            #expect(throws: HCPackError.self) {
                try ZipEntryRewrite.replaceFirstEntryData(
                    in: descriptor, path: "a.zip", name: name, with: reservation, finalCRC: finalCRC)
            }
            #expect(folder.read("a.zip") == built.bytes)
        }
        #expect(throws: HCPackError.self) {
            try ZipEntryRewrite.replaceCentralCRC(
                in: descriptor, path: "a.zip", name: "ContentInfo.plist", reservedCRC: finalCRC, finalCRC: reservedCRC)
        }
        #expect(folder.read("a.zip") == built.bytes)

        try ZipEntryRewrite.replaceFirstEntryData(
            in: descriptor, path: "a.zip", name: "ContentInfo.plist", with: filled, finalCRC: finalCRC)
        #expect(run("unzip", ["-t", folder.url("a.zip")]).status != 0)  // the central record still has the old CRC-32
        try ZipEntryRewrite.replaceCentralCRC(
            in: descriptor, path: "a.zip", name: "ContentInfo.plist", reservedCRC: reservedCRC, finalCRC: finalCRC)
        let tested = run("unzip", ["-t", folder.url("a.zip")])
        #expect(tested.status == 0, "\(tested.output)")
        #expect(builtFiles(folder.url("a.zip"), format: .zip, scratch: folder)["ContentInfo.plist"] == final)
    }

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
        #expect(filled.checksum() == CRC32.checksum(whole))
    }

    @Test("Only the first entry's central record, with the reserved CRC-32, is patched in flight")
    func patchedCentralRecord() throws {
        let name = Array("ContentInfo.plist".utf8)
        var record = [UInt8](repeating: 0, count: 46) + name + [1, 2, 3]
        record.replaceSubrange(0..<4, with: [0x50, 0x4b, 0x01, 0x02])
        record.replaceSubrange(16..<20, with: [0x78, 0x56, 0x34, 0x12])
        record[28] = UInt8(name.count)
        let patched = try #require(
            record.withUnsafeBytes {
                ZipEntryRewrite.patchedCentralRecord($0, name: name, reservedCRC: 0x1234_5678, finalCRC: 0xAABB_CCDD)
            })
        #expect(Array(patched[16..<20]) == [0xDD, 0xCC, 0xBB, 0xAA])
        #expect(patched[..<16] == record[..<16] && patched[20...] == record[20...])

        var otherCRC = record
        otherCRC[16] = 0
        var notFirst = record
        notFirst[42] = 9  // a local header offset other than 0
        var otherName = record
        otherName[46] = UInt8(ascii: "X")
        for bytes in [otherCRC, notFirst, otherName, Array(record.prefix(50))] {
            #expect(
                bytes.withUnsafeBytes {
                    ZipEntryRewrite.patchedCentralRecord($0, name: name, reservedCRC: 0x1234_5678, finalCRC: 0)
                } == nil)
        }
    }
}
