import HostedContent

extension ReportRendering {
    /// Problems one per line, errors first, in the same form as `verify` prints them.
    static func problemLines(_ problems: [Problem]) -> String {
        let sorted = problems.enumerated().sorted { a, b in
            a.element.severity != b.element.severity ? a.element.severity < b.element.severity : a.offset < b.offset
        }.map(\.element)
        return sorted.map { problem in
            let location = problem.path.isEmpty ? "" : problem.path + ": "
            return "\(problem.severity.rawValue): [\(problem.rule.rawValue)] \(location)\(problem.message)\n"
        }.joined()
    }
}
