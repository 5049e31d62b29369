import Foundation
import HostedContent

/// `hcpack rules`: every rule ID with its severity and what it checks.
struct RulesCommand: Command {
    static let spec = CommandSpec(
        name: "rules",
        summary: "List every rule that verify checks, with its ID and severity.",
        options: [OptionSpec("json", help: "Print one JSON object on stdout.")])

    let json: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        json = arguments.flag("json")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        if json {
            let rules = Rule.allCases.map { rule in
                JSONValue.object([
                    ("rule", .string(rule.rawValue)), ("severity", .string(rule.severity.rawValue)), ("summary", .string(rule.summary)),
                ])
            }
            context.out(JSONValue.object([("rules", .array(rules))]).rendered() + "\n")
        } else {
            let width = Rule.allCases.map { $0.rawValue.count }.max() ?? 0
            for rule in Rule.allCases {
                context.out(rule.rawValue.padding(toLength: width + 2, withPad: " ", startingAt: 0) + rule.severity.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0) + rule.summary + "\n")
            }
        }
        return ExitCode.success
    }
}
