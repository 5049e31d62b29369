import HostedContent

/// Text and JSON forms of verification results, shared by every command that verifies.
enum ReportRendering {
    /// Problems grouped errors first, one per line, then a count line.
    static func text(_ report: VerificationReport, label: String, strict: Bool) -> String {
        var text = ""
        let sorted = report.problems.problems.enumerated().sorted { a, b in
            a.element.severity != b.element.severity ? a.element.severity < b.element.severity : a.offset < b.offset
        }.map(\.element)
        for problem in sorted {
            let location = problem.path.isEmpty ? "" : PackagePath.printable(problem.path) + ": "
            text += "\(problem.severity.rawValue): [\(problem.rule.rawValue)] \(location)\(problem.message)\n"
        }
        let identity = [report.contentInfo?.productIdentifier, report.contentInfo?.contentVersion].compactMap { $0 }
        let name = identity.isEmpty ? label : "\(label) (\(identity.joined(separator: " ")))"
        let errors = report.problems.errorCount, warnings = report.problems.warningCount
        let verdict = report.isValid(strict: strict) ? "valid" : "INVALID"
        text += "\(name): \(verdict): \(plural(errors, "error")), \(plural(warnings, "warning")); "
        text += "\(plural(report.listedFileCount, "listed file")), \(report.contentBytes) content bytes\n"
        return text
    }

    static func plural(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }

    static func problems(_ list: ProblemList) -> JSONValue {
        .array(
            list.problems.map { problem in
                .object([
                    ("rule", .string(problem.rule.rawValue)), ("severity", .string(problem.severity.rawValue)),
                    ("path", .string(problem.path)), ("message", .string(problem.message)),
                ])
            })
    }

    static func json(_ report: VerificationReport, strict: Bool) -> JSONValue {
        let info = report.contentInfo
        var root: JSONValue = .null
        if let folder = report.snapshot.rootFolder { root = .string(folder) }
        let origin: JSONValue
        switch report.snapshot.origin {
        case .folder(let path): origin = .object([("kind", .string("folder")), ("path", .string(path))])
        case .archive(let path, let format):
            origin = .object([("kind", .string("archive")), ("path", .string(path)), ("format", .string(format)), ("rootFolder", root)])
        }
        return .object([
            ("valid", .bool(report.isValid(strict: strict))),
            ("errors", .number(Int64(report.problems.errorCount))),
            ("warnings", .number(Int64(report.problems.warningCount))),
            ("problems", problems(report.problems)),
            (
                "package",
                .object([
                    ("productIdentifier", info?.productIdentifier.map(JSONValue.string) ?? .null),
                    ("contentVersion", info?.contentVersion.map(JSONValue.string) ?? .null),
                    ("files", .number(Int64(report.listedFileCount))),
                    ("contentFiles", .number(Int64(report.contentFileCount))),
                    ("bytes", .number(report.contentBytes)),
                    ("source", origin),
                ])
            ),
        ])
    }
}
