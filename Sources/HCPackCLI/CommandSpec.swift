import Foundation

/// One option of a command, declared once: parsing, help, completions and the man page all read it.
public struct OptionSpec: Sendable {
    /// Long name without dashes ("dest").
    public var name: String
    /// Single-letter alias ("o"), if any.
    public var short: Character?
    /// Placeholder for the value ("DIR"); nil for a flag.
    public var valueName: String?
    public var help: String
    /// May be given more than once (values accumulate).
    public var repeatable: Bool
    /// The command cannot run without it: usage lists it, help and the man page say "(required)".
    public var isRequired: Bool

    public init(
        _ name: String, short: Character? = nil, value: String? = nil, repeatable: Bool = false, required: Bool = false,
        help: String
    ) {
        self.name = name
        self.short = short
        self.valueName = value
        self.help = help
        self.repeatable = repeatable
        self.isRequired = required
    }

    /// This option, required.
    public func required() -> OptionSpec {
        var option = self
        option.isRequired = true
        return option
    }

    /// The help text, with "(required)" first for a required option.
    public var helpText: String { isRequired ? "(required) " + help : help }

    /// "--dest DIR" (or "-o FILE"), as usage lists a required option.
    public var usageForm: String {
        (short.map { "-\($0)" } ?? "--\(name)") + (valueName.map { " " + $0 } ?? "")
    }

    public var isFlag: Bool { valueName == nil }

    /// "-o, --output OUTPUT" as shown in help.
    public var signature: String {
        var text = short.map { "-\($0), " } ?? ""
        text += "--\(name)"
        if let valueName { text += " \(valueName)" }
        return text
    }
}

/// A positional argument.
public struct ArgumentSpec: Sendable {
    public var name: String
    public var help: String
    public var isOptional: Bool
    /// The only values accepted, when the argument is one word of a fixed set (completions offer them).
    public var choices: [String]
    /// The last argument only: it takes every remaining value ("ARCHIVE...").
    public var isRepeatable: Bool

    public init(_ name: String, optional: Bool = false, repeatable: Bool = false, choices: [String] = [], help: String) {
        self.name = name
        self.help = help
        self.isOptional = optional
        self.isRepeatable = repeatable
        self.choices = choices
    }

    /// The name as usage shows it ("ARCHIVE..." when repeatable).
    public var usageName: String { isRepeatable ? name + "..." : name }
}

/// The declaration of one subcommand.
public struct CommandSpec: Sendable {
    public var name: String
    public var summary: String
    public var arguments: [ArgumentSpec]
    public var options: [OptionSpec]
    /// Longer text for `help COMMAND`, after the option list.
    public var discussion: String?

    public init(name: String, summary: String, arguments: [ArgumentSpec] = [], options: [OptionSpec] = [], discussion: String? = nil) {
        self.name = name
        self.summary = summary
        self.arguments = arguments
        self.options = options + [OptionSpec("help", short: "h", help: "Show this help.")]
        self.discussion = discussion
    }

    /// "hcpack verify [options] PATH".
    public var usage: String {
        var parts = ["hcpack", name]
        let required = options.filter(\.isRequired)
        if options.count > 1 + required.count { parts.append("[options]") }
        parts += required.map(\.usageForm)
        for argument in arguments { parts.append(argument.isOptional ? "[\(argument.usageName)]" : argument.usageName) }
        return parts.joined(separator: " ")
    }

    /// The full help text.
    public var help: String {
        var text = "\(summary)\n\nUsage: \(usage)\n"
        if !arguments.isEmpty {
            text += "\nArguments:\n"
            let width = arguments.map(\.name.count).max() ?? 0
            for argument in arguments {
                text += "  " + argument.name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + argument.help + "\n"
            }
        }
        text += "\nOptions:\n"
        let width = options.map(\.signature.count).max() ?? 0
        for option in options {
            text += "  " + option.signature.padding(toLength: width + 2, withPad: " ", startingAt: 0) + option.helpText + "\n"
        }
        if let discussion { text += "\n" + discussion + "\n" }
        return text
    }
}
