import HostedContent

/// `hcpack init` (being written).
struct InitCommand: Command {
    static let spec = CommandSpec(name: "init", summary: "Not available yet.")

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {}

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        throw HCPackError(.invalidRequest, "'hcpack init' is not available in this version")
    }
}
