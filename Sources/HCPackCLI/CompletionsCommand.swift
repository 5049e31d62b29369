import HostedContent

/// `hcpack completions SHELL`: prints a completion script for bash, zsh or fish.
struct CompletionsCommand: Command {
    static let spec = CommandSpec(
        name: "completions",
        summary: "Print a shell completion script (bash, zsh or fish).",
        arguments: [ArgumentSpec("SHELL", choices: ShellCompletions.shells, help: "bash, zsh or fish.")],
        discussion: """
            make install puts them where the shells look: share/bash-completion/completions/hcpack,
            share/zsh/site-functions/_hcpack, share/fish/vendor_completions.d/hcpack.fish.
            """)

    let shell: String

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        shell = arguments.argument(0) ?? ""
        guard ShellCompletions.shells.contains(shell) else {
            throw UsageError(
                "unknown shell '\(shell)'; choose one of \(ShellCompletions.shells.joined(separator: ", "))",
                command: Self.spec.name)
        }
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        context.out(ShellCompletions.script(for: shell, specs: HCPack.specs) ?? "")
        return ExitCode.success
    }
}

/// `hcpack man`: prints the hcpack(1) manual page (troff).
struct ManCommand: Command {
    static let spec = CommandSpec(
        name: "man",
        summary: "Print the hcpack(1) manual page (troff); view it with 'hcpack man | man -l -'.")

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {}

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        context.out(ManPage.render(specs: HCPack.specs, version: HCPack.version))
        return ExitCode.success
    }
}
