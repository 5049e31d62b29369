import Foundation
import HostedContent
import TestSupport
import Testing

@Suite("Size budgets (verify --budget)")
struct BudgetTests {
    /// A package whose Contents/ holds files of the given sizes (a.bin, b.bin, ...).
    static func package(_ folder: TemporaryFolder, sizes: [Int]) {
        let files = sizes.enumerated().map { index, size in
            ("\(Character(UnicodeScalar(UInt8(97 + index)))).bin", String(repeating: "x", count: size))
        }
        writeValidPackage(in: folder, root: "pkg", files: files)
    }

    @Test("Within 80% of every limit: valid, no budget problems")
    func within() {
        let folder = TemporaryFolder()
        Self.package(folder, sizes: [100, 100])
        folder.write("budget.json", #"{"maxTotalBytes": 1000, "maxFileBytes": 500, "maxFiles": 10}"#)
        let result = hcpack(["verify", "--budget", "budget.json", "--strict", "pkg"], in: folder.path)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(!result.stdout.contains("budget."))
    }

    @Test("At 80% of a limit: a budget.near-limit warning (fails only with --strict)")
    func nearLimit() {
        let folder = TemporaryFolder()
        Self.package(folder, sizes: [400, 400])
        folder.write("budget.json", #"{"maxTotalBytes": 1000}"#)
        let result = hcpack(["verify", "--budget", "budget.json", "pkg"], in: folder.path)
        #expect(result.status == 0)
        #expect(
            result.stdout.contains(
                "warning: [budget.near-limit] the content is 800 bytes, 80% of the budget's maxTotalBytes of 1000"))
        #expect(hcpack(["verify", "--strict", "--budget", "budget.json", "pkg"], in: folder.path).status == 1)
    }

    @Test(
        "Over a limit: budget.exceeded errors for total, per-file and count, naming the file",
        arguments: [
            (#"{"maxTotalBytes": 500}"#, "the content is 600 bytes, over the budget's maxTotalBytes of 500"),
            (#"{"maxFileBytes": 250}"#, "Contents/c.bin: the file is 300 bytes, over the budget's maxFileBytes of 250"),
            (#"{"maxFiles": 2}"#, "the package has 3 files, over the budget's maxFiles of 2"),
        ])
    func exceeded(budget: String, message: String) {
        let folder = TemporaryFolder()
        Self.package(folder, sizes: [100, 200, 300])
        folder.write("budget.json", budget)
        let result = hcpack(["verify", "--budget", "budget.json", "pkg"], in: folder.path)
        #expect(result.status == 1)
        #expect(result.stdout.contains("error: [budget.exceeded] \(message)"), "\(result.stdout)")
    }

    @Test("Budget problems appear in --json and apply to archives too")
    func jsonAndArchive() throws {
        let folder = TemporaryFolder()
        Self.package(folder, sizes: [100, 200, 300])
        zipFolder(folder.url("pkg"), to: folder.url("pkg.zip"))
        folder.write("budget.json", #"{"maxFileBytes": 250}"#)
        let result = hcpack(["verify", "--json", "--budget", folder.url("budget.json"), folder.url("pkg.zip")])
        #expect(result.status == 1)
        let object = try #require(jsonObject(result.stdout))
        let problems = try #require(object["problems"] as? [[String: Any]])
        #expect(problems.map { $0["rule"] as? String } == ["budget.near-limit", "budget.exceeded"])
        #expect(problems.map { $0["path"] as? String } == ["Contents/b.bin", "Contents/c.bin"])
    }

    @Test(
        "A bad budget file is a usage error (exit 2) naming the file and what to fix",
        arguments: [
            (#"{"maxTotalBytes": 10, "maxBytes": 5}"#, "unknown key 'maxBytes'"),
            (#"{"maxFiles": "ten"}"#, "'maxFiles' must be a whole number"),
            (#"{"maxFiles": 1.5}"#, "'maxFiles' must be a whole number"),
            (#"{"maxFiles": true}"#, "'maxFiles' must be a whole number"),
            (#"{"maxFiles": 0}"#, "'maxFiles' must be positive"),
            (#"[1, 2]"#, "must be a JSON object"),
            (#"{"maxFiles": 3"#, "not valid JSON"),
        ])
    func badFile(content: String, message: String) {
        let folder = TemporaryFolder()
        Self.package(folder, sizes: [1])
        folder.write("budget.json", content)
        let result = hcpack(["verify", "--budget", "budget.json", "pkg"], in: folder.path)
        #expect(result.status == 2)
        #expect(result.stderr.contains("budget.json: "), "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    @Test("A missing budget file exits 3")
    func missingFile() {
        let folder = TemporaryFolder()
        Self.package(folder, sizes: [1])
        let result = hcpack(["verify", "--budget", "none.json", "pkg"], in: folder.path)
        #expect(result.status == 3)
        #expect(result.stderr.contains("none.json"))
    }

    @Test("The library check: exactly at the limit is near-limit, one byte over is exceeded")
    func boundaries() {
        let budget = SizeBudget(maxFileBytes: 100)
        #expect(budget.check(files: [("Contents/a", 79)]).rules.isEmpty)
        #expect(budget.check(files: [("Contents/a", 80)]).rules == [.budgetNearLimit])
        #expect(budget.check(files: [("Contents/a", 100)]).rules == [.budgetNearLimit])
        #expect(budget.check(files: [("Contents/a", 101)]).rules == [.budgetExceeded])
    }
}
