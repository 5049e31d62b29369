import HostedContent

/// `hcpack build` (being written).
struct BuildCommand: Command {
    static let spec = CommandSpec(name: "build", summary: "Not available yet.")

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {}

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        throw HCPackError(.invalidRequest, "'hcpack build' is not available in this version")
    }
}
