import ArchiveIO
import HostedContent
import PropertyList

/// Small limits so the fuzzer explores instead of inflating: 16 MiB per archive, 1 MiB plists.
private let limits = ReadLimits(
    archive: ArchiveLimits(
        maxEntries: 10_000, maxEntryBytes: 16 << 20, maxTotalBytes: 16 << 20, maxCompressionRatio: 200,
        ratioGraceBytes: 1 << 20),
    plist: PlistLimits(maxBytes: 1 << 20, maxDepth: 64, maxObjects: 100_000),
    maxFolderDepth: 128)

/// libFuzzer entry: archive verification from bytes, the path `hcpack verify x.zip` takes for a file:
/// `ArchiveReader(bytes:)` -> `PackageScanner.scanArchive(bytes:)` (names, hashing, ContentInfo.plist) ->
/// `Verifier.check` (every rule, including plist decoding and HCPackIntegrity).
@_cdecl("LLVMFuzzerTestOneInput")
public func archiveFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // Only reader setup failures (out of memory) throw; hostile archives give problems.
    guard let snapshot = try? PackageScanner.scanArchive(bytes: bytes, limits: limits) else { return 0 }
    let report = Verifier.check(snapshot, options: VerifyOptions(limits: limits))
    // Touch everything a renderer would.
    var length = 0
    for problem in report.problems.problems { length &+= problem.message.utf8.count &+ problem.path.utf8.count }
    _ = report.isValid(strict: true)
    return length == -1 ? 1 : 0
}
