// hcpack-library-example: uses only HostedContent's public API (docs/library.md).
//
//     swift run hcpack-library-example build SOURCE OUTPUT    build a package archive, with progress
//     swift run hcpack-library-example verify PATH [OLD]      verify, list files, and diff against OLD
//     swift run hcpack-library-example install ARCHIVE DEST   install the listed files into DEST, with progress
//     swift run hcpack-library-example fetch CATALOG PUB DEST PRODUCT   fetch from a signed catalog, event by event
//
// Exit status follows the hcpack command line: 0 success, 1 invalid package, 2 usage, 3 unreadable input.
import Foundation
import HostedContent

func fail(_ message: String, _ status: Int32) -> Never {
    FileHandle.standardError.write(Data("hcpack-library-example: \(message)\n".utf8))
    exit(status)
}

/// Progress callbacks arrive on the working thread; print one line per phase.
final class PhasePrinter: @unchecked Sendable {
    private var lastPhase = ""
    func callAsFunction(_ update: ProgressUpdate) {
        guard update.phase != lastPhase else { return }
        lastPhase = update.phase
        FileHandle.standardError.write(Data("\(update.phase)...\n".utf8))
    }
}

func build(source: String, output: String) throws(HCPackError) -> Int32 {
    let printer = PhasePrinter()
    // prepare validates without writing; its report says what is wrong.
    let options = BuildOptions(source: source, output: output)
    let plan = try Builder.prepare(options, progress: { printer($0) })
    guard plan.isValid else {
        for problem in plan.report.problems.problems where problem.severity == .error {
            print("error: [\(problem.rule.rawValue)] \(problem.path): \(problem.message)")
        }
        return 1
    }
    let result = try Builder.write(plan, options: options, progress: { printer($0) })
    print(
        "built \(result.output): \(result.productIdentifier) \(result.contentVersion), \(result.fileCount) files, \(result.outputBytes) bytes"
    )
    return 0
}

func verify(_ path: String, against old: String?) throws(HCPackError) -> Int32 {
    // Verify: every problem at once; a thrown HCPackError means the input could not be read at all.
    var options = VerifyOptions()
    options.budget = SizeBudget(maxTotalBytes: 500_000_000)
    let report = try Verifier.verify(path, options: options)
    let info = report.contentInfo
    print("package: \(info?.productIdentifier ?? "?") \(info?.contentVersion ?? "?")")
    print("files: \(report.listedFileCount) listed, \(report.contentFileCount) under Contents/, \(report.contentBytes) bytes")
    for problem in report.problems.problems {
        print("\(problem.severity.rawValue): [\(problem.rule.rawValue)] \(problem.path): \(problem.message)")
    }
    print(report.isValid() ? "valid" : "INVALID")

    // Inspect: every file with its SHA-256.
    let inspection = try Inspector.inspect(path)
    for file in inspection.files.prefix(5) {
        print("  \(file.sha256.prefix(12))  \(file.size)  \(file.path)")
    }

    // Diff against an earlier release.
    if let old {
        let diff = try PackageComparer.diff(old: old, new: path)
        let counts = FileChangeKind.allCases.map { "\(diff.files($0).count) \($0.rawValue)" }
        print("since \(old): \(counts.joined(separator: ", ")); version \(diff.versionChange.rawValue)")
    }
    return report.isValid() ? 0 : 1
}

func install(_ archive: String, into destination: String) throws(HCPackError) -> Int32 {
    let printer = PhasePrinter()
    switch try Installer.install(archive, options: InstallOptions(destination: destination), progress: { printer($0) }) {
    case .completed(let result):
        let previous = result.previousVersion.map { " (was \($0))" } ?? ""
        print(
            "\(result.status.rawValue) \(result.productIdentifier) \(result.version)\(previous): \(result.installed.count) files placed"
        )
        return 0
    case .rejected(let report):
        for problem in report.problems.problems where problem.severity == .error {
            print("error: [\(problem.rule.rawValue)] \(problem.path): \(problem.message)")
        }
        return 1
    }
}

/// Fetches PRODUCT from a signed catalog into DEST: the events arrive as an async sequence, the report last.
/// Cancelling the task that iterates stops the transfer and keeps the partial file; the next run resumes it.
func fetch(catalog: String, trusted: String, into destination: String, product: String) async -> Int32 {
    do {
        var options = FetchOptions(
            catalog: catalog, trustedKeys: try VerifierKey.load(trusted, relativeTo: "."), destination: destination)
        options.products = [product]
        for try await update in Fetcher.events(options) {
            switch update {
            case .event(.downloading(let name, _, let bytes, let total)):
                FileHandle.standardError.write(Data("\(name): \(bytes)/\(total) bytes\n".utf8))
            case .event(.failed(let name, let reason, let resumable)):
                print("failed \(name): \(reason)\(resumable ? " (a rerun resumes)" : "")")
            case .event(let event):
                FileHandle.standardError.write(Data("\(event)\n".utf8))
            case .finished(let report):
                for item in report.products where item.status != .failed {
                    print("\(item.status.rawValue) \(item.productIdentifier) \(item.toVersion): \(item.downloadedBytes) bytes downloaded")
                }
                return report.hasRefusals ? 1 : report.hasFailures ? 3 : 0
            }
        }
        return 3
    } catch let error as HCPackError {
        print("error: \(error.message)")
        return error.code == .invalidRequest ? 2 : error.code == .invalidPackage ? 1 : 3
    } catch {
        print("error: \(error)")
        return 3
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let usage = "usage: hcpack-library-example build SOURCE OUTPUT | verify PATH [OLD] | install ARCHIVE DEST | fetch CATALOG PUB DEST PRODUCT"
if arguments.first == "fetch" {
    guard arguments.count == 5 else { fail(usage, 2) }
    exit(await fetch(catalog: arguments[1], trusted: arguments[2], into: arguments[3], product: arguments[4]))
}
do {
    switch (arguments.first, arguments.count) {
    case ("build", 3): exit(try build(source: arguments[1], output: arguments[2]))
    case ("verify", 2), ("verify", 3): exit(try verify(arguments[1], against: arguments.count == 3 ? arguments[2] : nil))
    case ("install", 3): exit(try install(arguments[1], into: arguments[2]))
    default: fail(usage, 2)
    }
} catch {
    let status: Int32 = error.code == .invalidRequest ? 2 : error.code == .invalidPackage ? 1 : 3
    fail(error.message, status)
}
