import Foundation

/// Limits on a package's content: total bytes, bytes of any one file, number of files (docs/budgets.md).
///
/// Each limit is optional. A value above a limit is a `budget.exceeded` error; a value at or above
/// `warningFraction` of a limit (but not above it) is a `budget.near-limit` warning.
public struct SizeBudget: Sendable, Equatable {
    /// Largest total size of the regular files under Contents/, in bytes.
    public var maxTotalBytes: Int64?
    /// Largest size of any one regular file under Contents/, in bytes.
    public var maxFileBytes: Int64?
    /// Largest number of regular files under Contents/.
    public var maxFiles: Int64?

    /// The JSON keys a budget file may hold.
    public static let keys = ["maxTotalBytes", "maxFileBytes", "maxFiles"]
    /// The share of a limit at which a warning starts (80%).
    public static let warningFraction = 0.8

    /// Creates a budget; nil means no limit.
    public init(maxTotalBytes: Int64? = nil, maxFileBytes: Int64? = nil, maxFiles: Int64? = nil) {
        self.maxTotalBytes = maxTotalBytes
        self.maxFileBytes = maxFileBytes
        self.maxFiles = maxFiles
    }

    /// Reads a budget file.
    /// - Throws: `HCPackError` `.notFound`/`.permissionDenied`/`.io` when unreadable; `.invalidRequest` naming the
    ///   file and the key when its content is wrong (not JSON, not an object, unknown key, not a positive integer).
    public static func load(_ path: String) throws(HCPackError) -> SizeBudget {
        let bytes = try FileSystem.readFile(path, limit: 1 << 20)
        return try parse(bytes, path: path)
    }

    /// Parses budget JSON; `path` names the file in error messages.
    public static func parse(_ bytes: [UInt8], path: String) throws(HCPackError) -> SizeBudget {
        do {
            return try JSONDecoder().decode(Document.self, from: Data(bytes)).budget
        } catch let error as FormatError {
            throw HCPackError(.invalidRequest, "\(path): \(error.message)", path: path)
        } catch DecodingError.typeMismatch {
            throw HCPackError(
                .invalidRequest, "\(path): the budget must be a JSON object such as {\"maxTotalBytes\": 500000000}", path: path)
        } catch {
            throw HCPackError(.invalidRequest, "\(path): not valid JSON; see docs/budgets.md for the format", path: path)
        }
    }

    /// Checks the regular files under Contents/ of a snapshot against the budget.
    public func check(_ snapshot: PackageSnapshot) -> ProblemList {
        var sizes: [(path: String, size: Int64)] = []
        for entry in snapshot.entries where entry.kind == .file && entry.path.hasPrefix("Contents/") {
            sizes.append((entry.path, entry.size))
        }
        return check(files: sizes)
    }

    /// Checks files (package-relative paths and sizes) against the budget.
    public func check(files: [(path: String, size: Int64)]) -> ProblemList {
        var problems = ProblemList()
        if let limit = maxTotalBytes {
            let total = files.saturatingSum(\.size)
            Self.judge(
                total, limit: limit, path: "", what: "the content is \(total) bytes", key: "maxTotalBytes", into: &problems)
        }
        if let limit = maxFileBytes {
            for file in files {
                Self.judge(
                    file.size, limit: limit, path: file.path, what: "the file is \(file.size) bytes", key: "maxFileBytes",
                    into: &problems)
            }
        }
        if let limit = maxFiles {
            let count = Int64(files.count)
            Self.judge(count, limit: limit, path: "", what: "the package has \(count) files", key: "maxFiles", into: &problems)
        }
        return problems
    }

    private static func judge(
        _ value: Int64, limit: Int64, path: String, what: String, key: String, into problems: inout ProblemList
    ) {
        if value > limit {
            problems.add(
                .budgetExceeded, path: path,
                "\(what), over the budget's \(key) of \(limit); shrink the content or raise the budget")
        } else if Double(value) >= Double(limit) * warningFraction {
            let percent = Int((Double(value) / Double(limit) * 100).rounded(.down))
            problems.add(.budgetNearLimit, path: path, "\(what), \(percent)% of the budget's \(key) of \(limit)")
        }
    }

    struct FormatError: Error {
        var message: String
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The JSON object, checked key by key so messages name the key.
    private struct Document: Decodable {
        var budget = SizeBudget()

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyKey.self)
            let unknown = container.allKeys.map(\.stringValue).filter { !SizeBudget.keys.contains($0) }.sorted()
            if let first = unknown.first {
                throw FormatError(
                    message:
                        "unknown key '\(first)'; a budget may set only \(SizeBudget.keys.joined(separator: ", ")) (docs/budgets.md)"
                )
            }
            func limit(_ key: String) throws -> Int64? {
                let codingKey = AnyKey(stringValue: key)
                guard container.contains(codingKey) else { return nil }
                let value: Int64
                do {
                    value = try container.decode(Int64.self, forKey: codingKey)
                } catch {
                    throw FormatError(message: "'\(key)' must be a whole number, without quotes or decimals")
                }
                guard value > 0 else { throw FormatError(message: "'\(key)' must be positive, got \(value)") }
                return value
            }
            budget.maxTotalBytes = try limit("maxTotalBytes")
            budget.maxFileBytes = try limit("maxFileBytes")
            budget.maxFiles = try limit("maxFiles")
        }
    }
}
