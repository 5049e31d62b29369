/// How serious a problem is: errors make a package invalid, warnings only with `--strict`.
public enum Severity: String, Sendable, Codable, Comparable {
    case error
    case warning

    public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs == .error && rhs == .warning }
}

/// One problem found in a package: a stable rule, where, and what to do about it.
public struct Problem: Sendable, Equatable, Codable {
    public var rule: Rule
    public var severity: Severity
    /// Path relative to the package root (or the archive entry's name); empty for the package as a whole.
    public var path: String
    public var message: String

    public init(_ rule: Rule, path: String, _ message: String, severity: Severity? = nil) {
        self.rule = rule
        self.severity = severity ?? rule.severity
        self.path = path
        self.message = message
    }
}

/// Problems in the order found, with counts.
public struct ProblemList: Sendable, Equatable {
    public private(set) var problems: [Problem] = []

    public init() {}

    public mutating func add(_ rule: Rule, path: String, _ message: String, severity: Severity? = nil) {
        problems.append(Problem(rule, path: path, message, severity: severity))
    }

    public mutating func append(contentsOf other: ProblemList) { problems += other.problems }

    public var errorCount: Int { problems.count { $0.severity == .error } }
    public var warningCount: Int { problems.count { $0.severity == .warning } }
    public var hasErrors: Bool { problems.contains { $0.severity == .error } }

    /// The rule IDs found, for tests and summaries.
    public var rules: Set<Rule> { Set(problems.map(\.rule)) }
}
