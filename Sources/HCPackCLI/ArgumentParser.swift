/// A command-line mistake: exit 2 with the message and the usage line.
public struct UsageError: Error, Sendable, Equatable {
    public var message: String
    /// The command whose usage line to print, when known.
    public var command: String?

    public init(_ message: String, command: String? = nil) {
        self.message = message
        self.command = command
    }
}

/// The arguments of one command after parsing against its `CommandSpec`.
public struct ParsedArguments: Sendable {
    public let spec: CommandSpec
    private var flags: Set<String> = []
    private var values: [String: [String]] = [:]
    public private(set) var positionals: [String] = []

    /// Parses `arguments` (everything after the command name). `--name=value`, `--name value`, `-o value`, and
    /// `--` (everything after is positional) are understood; unknown options are errors.
    public init(_ arguments: [String], spec: CommandSpec) throws(UsageError) {
        self.spec = spec
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let token = arguments[index]
            index += 1
            if onlyPositionals || token == "-" || !token.hasPrefix("-") {
                positionals.append(token)
                continue
            }
            if token == "--" {
                onlyPositionals = true
                continue
            }
            var inlineValue: String?
            let option: OptionSpec?
            if token.hasPrefix("--") {
                var name = String(token.dropFirst(2))
                if let equals = name.firstIndex(of: "=") {
                    inlineValue = String(name[name.index(after: equals)...])
                    name = String(name[..<equals])
                }
                option = spec.options.first { $0.name == name }
            } else {
                guard token.count == 2 else {
                    throw UsageError("unknown option '\(token)' (combine no short options; write each separately)", command: spec.name)
                }
                option = spec.options.first { $0.short == token.last }
            }
            guard let option else {
                throw UsageError("unknown option '\(token)'", command: spec.name)
            }
            if option.isFlag {
                if inlineValue != nil { throw UsageError("option '--\(option.name)' takes no value", command: spec.name) }
                flags.insert(option.name)
                continue
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                guard index < arguments.count else {
                    throw UsageError("option '\(token)' needs a value (\(option.valueName ?? "VALUE"))", command: spec.name)
                }
                value = arguments[index]
                index += 1
            }
            if !option.repeatable && values[option.name] != nil {
                throw UsageError("option '--\(option.name)' given more than once", command: spec.name)
            }
            values[option.name, default: []].append(value)
        }
        if flags.contains("help") { return }
        let required = spec.arguments.filter { !$0.isOptional }.count
        if positionals.count < required {
            let missing = spec.arguments[positionals.count].name
            throw UsageError("missing argument \(missing)", command: spec.name)
        }
        if positionals.count > spec.arguments.count && spec.arguments.last?.isRepeatable != true {
            throw UsageError("unexpected argument '\(positionals[spec.arguments.count])'", command: spec.name)
        }
    }

    /// Whether a flag was given.
    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// The value of a single-valued option.
    public func value(_ name: String) -> String? { values[name]?.last }

    /// All values of a repeatable option, in order.
    public func values(_ name: String) -> [String] { values[name] ?? [] }

    /// The positional arguments from `index` on (a repeatable last argument's values).
    public func arguments(from index: Int) -> [String] { index < positionals.count ? Array(positionals[index...]) : [] }

    /// The positional argument at `index`, when given.
    public func argument(_ index: Int) -> String? { index < positionals.count ? positionals[index] : nil }

    /// An integer option, with a usage error naming the option when malformed.
    public func integer(_ name: String) throws(UsageError) -> Int64? {
        guard let text = value(name) else { return nil }
        guard let number = Int64(text) else {
            throw UsageError("option '--\(name)' needs a whole number, got '\(text)'", command: spec.name)
        }
        return number
    }
}
