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
