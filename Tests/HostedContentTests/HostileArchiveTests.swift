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
    @Test("Each hostile archive is reported by its rule, fast, and is never valid", arguments: hostileArchives)
    func hostile(_ archive: HostileArchive) throws {
        let folder = TemporaryFolder()
        let made = python(archive.program, in: folder.path)
        try #require(made.status == 0, "fixture script failed: \(made.output)")
        let started = Date()
        let report = try Verifier.verify(folder.url(archive.file), options: hostileVerifyOptions())
        let found = Set(report.problems.problems.map(\.rule.rawValue))
        #expect(!found.isDisjoint(with: archive.rules), "expected one of \(archive.rules.sorted()), got \(found.sorted())")
        #expect(!report.isValid(strict: true))
        #expect(report.problems.problems.allSatisfy { !$0.message.isEmpty })
        #expect(Date().timeIntervalSince(started) < 30, "bounded time")
        // Nothing of the plist's external entity may leak into any message.
        #expect(!report.problems.problems.contains { $0.message.contains("root:x:0:0") })
    }
}
