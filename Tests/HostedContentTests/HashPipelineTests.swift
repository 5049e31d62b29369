import ArchiveIO
import Digest
import FileSystemIO
import Foundation
@testable import HostedContent
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Small archives are hashed on the reading thread (`HashPipeline(inline:)`), larger ones on workers: both
/// ways must give every file the same SHA-256 and CRC-32 and write the same bytes.
@Suite("HashPipeline: inline and on workers alike")
struct HashPipelineTests {
    /// Files of 0 bytes to over two of the workers' 1 MiB buffers, fed in 64 KiB chunks.
    static let files: [[UInt8]] = {
        var generator = SystemRandomNumberGenerator()
        return [0, 1, 5_000, (1 << 20) + 17, 2_500_000].map { size in (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) } }
    }()

    @Test(
        "The same digests, CRC-32s and written files inline as on the workers, with and without a writing worker",
        arguments: [false, true])
    func inlineMatchesWorkers(writesFiles: Bool) throws {
        let folder = TemporaryFolder()
        for inline in [false, true] {
            let pipeline = HashPipeline(writer: writesFiles ? .ownThread : .hashingThread, checksums: true, inline: inline)
            for (index, bytes) in Self.files.enumerated() {
                let path = folder.url("\(inline)-\(index)")
                let file = writesFiles
                    ? pipeline.adopt(startsWriteback: false) { () throws(HCPackError) in
                        (open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600), path)
                    } : nil
                bytes.withUnsafeBytes { all in
                    for start in stride(from: 0, to: all.count, by: 64 << 10) {
                        pipeline.update(UnsafeRawBufferPointer(rebasing: all[start..<min(start + (64 << 10), all.count)]), writingTo: file)
                    }
                }
                #expect(pipeline.end() == index)
                if let file { pipeline.close(file, keep: true) }
            }
            try pipeline.finishWriting()
            #expect(pipeline.finish() == Self.files.map { Digest.Hasher.digest(.sha256, of: $0) }, "inline: \(inline)")
            #expect(pipeline.checksums() == Self.files.map { CRC32.checksum($0) }, "inline: \(inline)")
            for (index, bytes) in Self.files.enumerated() where writesFiles {
                let written = FileManager.default.contents(atPath: folder.url("\(inline)-\(index)")).map { [UInt8]($0) }
                #expect(written == bytes, "inline: \(inline), file \(index)")
            }
        }
    }
}
