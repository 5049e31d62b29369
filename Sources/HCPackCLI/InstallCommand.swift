import HostedContent

/// `hcpack install` (being written).
struct InstallCommand: Command {
    static let spec = CommandSpec(name: "install", summary: "Not available yet.")

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {}

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        throw HCPackError(.invalidRequest, "'hcpack install' is not available in this version")
    }
}
