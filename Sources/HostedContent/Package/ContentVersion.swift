/// A content version: integers separated by periods, compared numerically ("1.10" > "1.9", "1.0" == "1").
public struct ContentVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The numeric components.
    public let components: [UInt64]
    /// The text exactly as written in the plist.
    public let text: String

    /// Parses `text`; nil unless it is one or more decimal integers separated by single periods.
    public init?(_ text: String) {
        guard !text.isEmpty, text.utf8.count <= 64 else { return nil }
        var components: [UInt64] = []
        for part in text.split(separator: ".", omittingEmptySubsequences: false) {
            guard !part.isEmpty, part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = UInt64(part) else {
                return nil
            }
            components.append(value)
        }
        self.components = components
        self.text = text
    }

    public var description: String { text }

    /// Components with trailing zeros removed, so "1.0" and "1" compare equal.
    private var significant: ArraySlice<UInt64> {
        var end = components.count
        while end > 1 && components[end - 1] == 0 { end -= 1 }
        return components[..<end]
    }

    public static func < (lhs: ContentVersion, rhs: ContentVersion) -> Bool {
        let left = lhs.significant, right = rhs.significant
        for (a, b) in zip(left, right) where a != b { return a < b }
        return left.count < right.count
    }

    public static func == (lhs: ContentVersion, rhs: ContentVersion) -> Bool {
        lhs.significant == rhs.significant
    }

    public func hash(into hasher: inout Swift.Hasher) { hasher.combine(Array(significant)) }
}
