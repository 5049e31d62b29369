import Foundation
import HostedContent
import TestSupport
import Testing

/// Verify limits small enough that the "too many entries" case trips them without a million entries.
func hostileVerifyOptions() -> VerifyOptions {
    var options = VerifyOptions()
    options.limits.archive.maxEntries = 1000
    return options
}

@Suite("verify: hostile archives")
struct HostileArchiveTests {
    // A hang fails the test after minutes; how fast each is refused is measured by `make bench`.
    @Test("Each hostile archive is reported by its rule and is never valid", .timeLimit(.minutes(5)), arguments: hostileArchives)
    func hostile(_ archive: HostileArchive) throws {
        let folder = TemporaryFolder()
        let made = python(archive.program, in: folder.path)
        try #require(made.status == 0, "fixture script failed: \(made.output)")
        let report = try Verifier.verify(folder.url(archive.file), options: hostileVerifyOptions())
        let found = Set(report.problems.problems.map(\.rule.rawValue))
        #expect(!found.isDisjoint(with: archive.rules), "expected one of \(archive.rules.sorted()), got \(found.sorted())")
        #expect(!report.isValid(strict: true))
        #expect(report.problems.problems.allSatisfy { !$0.message.isEmpty })
        // Nothing of the plist's external entity may leak into any message.
        #expect(!report.problems.problems.contains { $0.message.contains("root:x:0:0") })
    }
}
