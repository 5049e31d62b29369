/// Sums of sizes that an archive, a plist or a receipt claims: untrusted, each may be near `Int64.max`, so a
/// sum saturates instead of trapping (a trap is a crash on hostile input; docs/fuzzing.md).
extension Int64 {
    /// `self + other`, clamped to `Int64.min...Int64.max` instead of trapping.
    public func addingSaturated(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}

extension Sequence {
    /// The sum of `size` over the elements, clamped to `Int64.min...Int64.max` (`Int64.addingSaturated`).
    public func saturatingSum(_ size: (Element) throws -> Int64) rethrows -> Int64 {
        try reduce(Int64(0)) { $0.addingSaturated(try size($1)) }
    }
}
