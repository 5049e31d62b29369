// hcpack-library-example: uses only HostedContent's public API to verify a package and summarise it.
//
//     swift run hcpack-library-example PATH [OLD]
//
// Prints the package's identity, its problems, and (given OLD) what changed since OLD. Exit status: 0 valid,
// 1 invalid, 2 usage, 3 unreadable — the same convention as the hcpack command line.
import Foundation
import HostedContent

let arguments = Array(CommandLine.arguments.dropFirst())
guard (1...2).contains(arguments.count) else {
    FileHandle.standardError.write(Data("usage: hcpack-library-example PATH [OLD]\n".utf8))
    exit(2)
}

do {
    // Verify: every problem at once; a thrown HCPackError means the input could not be read at all.
    var options = VerifyOptions()
    options.budget = SizeBudget(maxTotalBytes: 500_000_000)
    let report = try Verifier.verify(arguments[0], options: options)
    let info = report.contentInfo
    print("package: \(info?.productIdentifier ?? "?") \(info?.contentVersion ?? "?")")
    print("files: \(report.listedFileCount) listed, \(report.contentFileCount) under Contents/, \(report.contentBytes) bytes")
    for problem in report.problems.problems {
        print("\(problem.severity.rawValue): [\(problem.rule.rawValue)] \(problem.path): \(problem.message)")
    }
    print(report.isValid() ? "valid" : "INVALID")

    // Inspect: every file with its SHA-256.
    let inspection = try Inspector.inspect(arguments[0])
    for file in inspection.files.prefix(5) {
        print("  \(file.sha256.prefix(12))  \(file.size)  \(file.path)")
    }

    // Diff against an earlier release.
    if arguments.count == 2 {
        let diff = try PackageComparer.diff(old: arguments[1], new: arguments[0])
        let counts = FileChangeKind.allCases.map { "\(diff.files($0).count) \($0.rawValue)" }
        print("since \(arguments[1]): \(counts.joined(separator: ", ")); version \(diff.versionChange.rawValue)")
    }
    exit(report.isValid() ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
    exit(error.code == .invalidRequest ? 2 : error.code == .invalidPackage ? 1 : 3)
}
