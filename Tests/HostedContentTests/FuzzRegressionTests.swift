import ArchiveIO
import Foundation
import HostedContent
import TestSupport
import Testing

/// Inputs the fuzzers (docs/fuzzing.md) or their harnesses turned up, pinned so they stay fixed.
@Suite("Fuzz regressions: archive verification")
struct ArchiveFuzzRegressionTests {
    /// A 334-byte zip: two entries flagged encrypted (general purpose bit 0) whose zip64 extra fields claim
    /// 2^62 uncompressed bytes each. Encrypted entries are never read, so their sizes stay the header's
    /// claim; summing the two trapped with an arithmetic overflow in `Verifier.check` (content size rule).
    static let encryptedZip64Sizes = """
        UEsDBC0AAQAAAAAAAAAAAAAA//////////8OABQAQ29udGVudHMvYS5iaW4BABAAAAAAAAAAAEAMAAAAAAAAAAAAAAAAAAAAAAAAAFBLAwQt\
        AAEAAAAAAAAAAAAAAP//////////DgAUAENvbnRlbnRzL2IuYmluAQAQAAAAAAAAAABADAAAAAAAAAAAAAAAAAAAAAAAAABQSwECLQAtAAEA\
        AAAAAAAAAAAAAP//////////DgAUAAAAAAAAAAAApIEAAAAAQ29udGVudHMvYS5iaW4BABAAAAAAAAAAAEAMAAAAAAAAAFBLAQItAC0AAQAA\
        AAAAAAAAAAAA//////////8OABQAAAAAAAAAAACkgUwAAABDb250ZW50cy9iLmJpbgEAEAAAAAAAAAAAQAwAAAAAAAAAUEsFBgAAAAACAAIA\
        oAAAAJgAAAAAAA==
        """

    /// fuzz/corpus/ArchiveFuzzer/delta-patch-overflow.zip (fuzz/make-seeds.sh): a delta whose HCPackPatches record
    /// claims a 2^63-1-byte base and whose HCPackIntegrity claims a 2^63-1-byte result. Their sum trapped with an
    /// arithmetic overflow in `PatchCodec.windowLog` from `FilePatch.check` (outside review, finding 04).
    static let deltaPatchOverflow = """
        UEsDBBQAAAAAAAAAIVziGtJ5ggUAAIIFAAARAAAAQ29udGVudEluZm8ucGxpc3Q8P3htbCB2ZXJzaW9uPSIxLjAiIGVuY29kaW5nPSJVVEYt\
        OCI/Pgo8IURPQ1RZUEUgcGxpc3QgUFVCTElDICItLy9BcHBsZS8vRFREIFBMSVNUIDEuMC8vRU4iICJodHRwOi8vd3d3LmFwcGxlLmNvbS9E\
        VERzL1Byb3BlcnR5TGlzdC0xLjAuZHRkIj4KPHBsaXN0IHZlcnNpb249IjEuMCI+CjxkaWN0PgoJPGtleT5JQVBQcm9kdWN0SWRlbnRpZmll\
        cjwva2V5PgoJPHN0cmluZz5jb20uZXhhbXBsZS5sZXZlbHM8L3N0cmluZz4KCTxrZXk+Q29udGVudFZlcnNpb248L2tleT4KCTxzdHJpbmc+\
        MS4xPC9zdHJpbmc+Cgk8a2V5PkZpbGVzPC9rZXk+Cgk8YXJyYXk+CgkJPHN0cmluZz5iaWcuYmluPC9zdHJpbmc+Cgk8L2FycmF5PgoJPGtl\
        eT5IQ1BhY2tJbnRlZ3JpdHk8L2tleT4KCTxkaWN0PgoJCTxrZXk+YmlnLmJpbjwva2V5PgoJCTxkaWN0PgoJCQk8a2V5PlNpemU8L2tleT4K\
        CQkJPGludGVnZXI+OTIyMzM3MjAzNjg1NDc3NTgwNzwvaW50ZWdlcj4KCQkJPGtleT5TSEEyNTY8L2tleT4KCQkJPHN0cmluZz5lM2IwYzQ0\
        Mjk4ZmMxYzE0OWFmYmY0Yzg5OTZmYjkyNDI3YWU0MWU0NjQ5YjkzNGNhNDk1OTkxYjc4NTJiODU1PC9zdHJpbmc+CgkJPC9kaWN0PgoJPC9k\
        aWN0PgoJPGtleT5IQ1BhY2tEZWx0YUJhc2U8L2tleT4KCTxkaWN0PgoJCTxrZXk+Q29udGVudFZlcnNpb248L2tleT4KCQk8c3RyaW5nPjEu\
        MDwvc3RyaW5nPgoJCTxrZXk+UGxpc3RTSEEyNTY8L2tleT4KCQk8c3RyaW5nPmFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFh\
        YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE8L3N0cmluZz4KCQk8a2V5PlRhcmdldFBsaXN0U0hBMjU2PC9rZXk+CgkJPHN0cmluZz5i\
        YmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiPC9zdHJpbmc+Cgk8L2RpY3Q+\
        Cgk8a2V5PkhDUGFja1BhdGNoZXM8L2tleT4KCTxkaWN0PgoJCTxrZXk+YmlnLmJpbjwva2V5PgoJCTxkaWN0PgoJCQk8a2V5PkJhc2VTaXpl\
        PC9rZXk+CgkJCTxpbnRlZ2VyPjkyMjMzNzIwMzY4NTQ3NzU4MDc8L2ludGVnZXI+CgkJCTxrZXk+QmFzZVNIQTI1Njwva2V5PgoJCQk8c3Ry\
        aW5nPmNjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2M8L3N0cmluZz4KCQkJ\
        PGtleT5QYXRjaFNpemU8L2tleT4KCQkJPGludGVnZXI+MTg8L2ludGVnZXI+CgkJCTxrZXk+UGF0Y2hTSEEyNTY8L2tleT4KCQkJPHN0cmlu\
        Zz40NjU1YTQ2MDE5YzIyYjdjODE0OGUxN2U2MzY1ZmZhZGI3YjE5MzI2Y2JkOGQwMWRjYjUwMmIzMjkwNjFjNjBiPC9zdHJpbmc+CgkJCTxr\
        ZXk+V2luZG93TG9nPC9rZXk+CgkJCTxpbnRlZ2VyPjMxPC9pbnRlZ2VyPgoJCTwvZGljdD4KCTwvZGljdD4KPC9kaWN0Pgo8L3BsaXN0PgpQ\
        SwMEFAAAAAAAAAAhXAlO6uESAAAAEgAAACAAAABDb250ZW50cy8uaGNwYWNrLXBhdGNoZXMvYmlnLmJpbii1L/3AUAAQAAAAAAAAA4AAAFBL\
        AQIUAxQAAAAAAAAAIVziGtJ5ggUAAIIFAAARAAAAAAAAAAAAAACAAQAAAABDb250ZW50SW5mby5wbGlzdFBLAQIUAxQAAAAAAAAAIVwJTurh\
        EgAAABIAAAAgAAAAAAAAAAAAAACAAbEFAABDb250ZW50cy8uaGNwYWNrLXBhdGNoZXMvYmlnLmJpblBLBQYAAAAAAgACAI0AAAABBgAAAAA=
        """

    static func bytes(base64: String) throws -> [UInt8] {
        Array(try #require(Data(base64Encoded: base64)))
    }

    @Test("encrypted entries claiming 2^62 bytes each are reported, and the size total saturates instead of trapping")
    func encryptedZip64SizesDoNotOverflow() throws {
        let archive = try Self.bytes(base64: Self.encryptedZip64Sizes)
        let snapshot = try PackageScanner.scanArchive(bytes: archive)
        #expect(snapshot.entries.map(\.size) == [1 << 62, 1 << 62])
        let report = Verifier.check(snapshot)
        #expect(report.problems.rules.contains(.encrypted))
        #expect(report.problems.rules.contains(.tooLarge))
        #expect(report.contentBytes == Int64.max)
        #expect(!report.isValid())
    }

    @Test("a delta whose patch claims a base and a result of 2^63-1 bytes gets rules, not a trap")
    func deltaPatchSizesDoNotOverflow() throws {
        let archive = try Self.bytes(base64: Self.deltaPatchOverflow)
        let snapshot = try PackageScanner.scanArchive(bytes: archive)
        #expect(snapshot.isComplete && snapshot.scanProblems.problems.isEmpty)
        let report = Verifier.check(snapshot)
        // The window cannot cover the sum; what the patch makes is over --max-bytes and --max-size.
        #expect(report.problems.rules.isSuperset(of: [.patchMalformed, .limitExceeded, .tooLarge]), "\(report.problems.problems)")
        #expect(!report.isValid())
        let inspection = Inspector.inspection(of: snapshot, archiveBytes: Int64(archive.count))
        #expect(FilePatch.summaries(of: try #require(inspection.contentInfo)).map(\.size) == [Int64.max])
    }

    @Test("inspect and a budget total the sizes encrypted entries claim without trapping")
    func encryptedZip64SizesInInspectAndBudget() throws {
        let snapshot = try PackageScanner.scanArchive(bytes: try Self.bytes(base64: Self.encryptedZip64Sizes))
        let inspection = Inspector.inspection(of: snapshot, archiveBytes: 334)
        #expect(inspection.contentBytes == Int64.max && inspection.packageBytes == Int64.max)
        #expect(SizeBudget(maxTotalBytes: 1 << 40).check(snapshot).rules == [.budgetExceeded])
    }

    @Test("scanArchive(bytes:) sees exactly what scanArchive(path) sees", arguments: archiveMakers.map(\.name))
    func bytesAndPathAgree(_ format: String) throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let command = try #require(archiveMakers.first { $0.name == format }?.command)
        let output = folder.url("p.\(format)")
        let result = run(command[0], command.dropFirst().map { $0 == "OUT" ? output : $0 }, in: folder.url("pkg"))
        #expect(result.status == 0, "\(result.output)")
        let fromPath = try PackageScanner.scanArchive(output)
        let archive = Array(try Data(contentsOf: URL(fileURLWithPath: output)))
        let fromBytes = try PackageScanner.scanArchive(bytes: archive, name: "download")
        #expect(fromBytes.entries == fromPath.entries)
        #expect(fromBytes.contentInfoBytes == fromPath.contentInfoBytes)
        guard case .archive(_, let format) = fromPath.origin else {
            Issue.record("a file scan gave origin \(fromPath.origin)")
            return
        }
        #expect(fromBytes.origin == .archive(path: "download", format: format))
        #expect(Verifier.check(fromBytes).problems.problems.isEmpty)
    }

    @Test("bytes that are no archive give an unsupported-format problem, not an error")
    func notAnArchive() throws {
        let snapshot = try PackageScanner.scanArchive(bytes: Array("just text\n".utf8))
        #expect(!snapshot.isComplete)
        #expect(snapshot.scanProblems.rules.contains(.unsupportedFormat))
    }
}
