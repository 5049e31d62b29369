import ArchiveIO
import Foundation
import Testing

/// Inputs found while fuzzing (docs/fuzzing.md), pinned so they stay fixed.
@Suite("Fuzz regressions: ArchiveReader")
struct ArchiveReaderFuzzRegressionTests {
    /// A gzipped pax tar (10 KiB before compression): `Contents/a` holds 1 byte; `Contents/b` is a GNU
    /// sparse 0.1 entry (`GNU.sparse.size=9223372036854775807`, map `0,1`) holding 1 byte at offset 0,
    /// so its trailing hole is Int64.max - 1 bytes.
    static let sparseHugeHole = """
        H4sIAAAAAAACA+3VuwrCMBSA4cx9ij6AtGl6iQ4FoYNO4uIDRMzg4IWmQvXprYJYxbVF7f8tJ4RApp9THPaV3VcuNKIzspElyX023mcjap1v\
        9zrTifCl6MHJVaZsvhTDVAsMWRAG4XRp6rk1G1t21/+H7p/N6/S1/0iqSAu/pv/OxRN/tlgF7mhKZwO3vdh8olQcayXjbJwmWqdjqT2l2s92\
        5pjLUeSRz88rHvt//WX7P2X/9+FMAgAAAAAAAAAAAADwF66H348XACgAAA==
        """

    @Test("a sparse hole of Int64.max bytes after other data is refused by maxTotalBytes, not an overflow trap")
    func hugeSparseHoleWithoutSizeLimits() throws {
        let archive = Array(try #require(Data(base64Encoded: Self.sparseHugeHole)))
        // The whole would pass Int64.max: `totalBytes + hole` overflowed (trapped) before the comparison.
        let limits = ArchiveLimits(maxEntryBytes: .max, maxTotalBytes: .max)
        let reader = try ArchiveReader(bytes: archive, limits: limits)
        #expect(try reader.next()?.path == "Contents/a")
        #expect(try reader.readData { _ in } == 1)
        let entry = try #require(try reader.next())
        #expect(entry.isSparse)
        #expect(entry.declaredSize == Int64.max)
        let error = archiveError { _ = try reader.readData { _ in } }
        #expect(error?.code == .limitExceeded)
        #expect(error?.message.contains("maxTotalBytes") == true, "\(String(describing: error))")
    }

    @Test("the same hole under the default limits stops at maxEntryBytes")
    func hugeSparseHoleDefaultLimits() throws {
        let archive = Array(try #require(Data(base64Encoded: Self.sparseHugeHole)))
        let reader = try ArchiveReader(bytes: archive)
        _ = try reader.next()
        _ = try reader.readData { _ in }
        _ = try reader.next()
        let error = archiveError { _ = try reader.readData { _ in } }
        #expect(error?.code == .limitExceeded)
        #expect(error?.message.contains("maxEntryBytes") == true, "\(String(describing: error))")
    }
}
