internal import CBuildInfo
import Foundation
import HostedContent

/// Exit codes shared by every command.
public enum ExitCode {
    public static let success: Int32 = 0
    /// The package or archive is invalid; nothing was written.
    public static let invalid: Int32 = 1
    /// A command-line mistake.
    public static let usage: Int32 = 2
    /// An I/O or environment failure (not found, permission, disk full).
    public static let environment: Int32 = 3
}

/// A subcommand: declared by a spec, built from parsed arguments, run against a context.
protocol Command {
    static var spec: CommandSpec { get }
    init(_ arguments: ParsedArguments, context: Context) throws(UsageError)
    /// Runs the command and returns its exit code; throws `HCPackError` for failures.
    func run(_ context: Context) throws(HCPackError) -> Int32
}

/// The `hcpack` program: dispatch, help, and the one place that turns errors into exit codes.
public enum HCPack {
    /// hcpack's version: the one place it is defined (the Makefile's `deb` and `dist` read it from here).
    public static let version = "0.1.0"

    /// The commit this binary was built from (Package.swift's `buildCommit`, from `$HCPACK_COMMIT` that the
    /// Makefile sets): 40 hex digits, "-dirty" after them when the checkout had uncommitted changes, or "unknown".
    public static let commit = String(cString: cbuildinfo_commit())

    /// What `hcpack --version` prints: the version, the commit and the licence.
    public static var versionText: String {
        """
        hcpack \(version)
        commit \(commit)
        Licensed under the Apache License, Version 2.0 (LICENSE; /usr/share/doc/hcpack/copyright when installed
        from the Debian package). Distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND.

        """
    }

    static var commands: [any Command.Type] {
        [
            InitCommand.self, BuildCommand.self, DeltaCommand.self, VerifyCommand.self, InstallCommand.self, InspectCommand.self, DiffCommand.self,
            KeygenCommand.self, PubkeyCommand.self, SignCommand.self, SignFileCommand.self, VerifyFileCommand.self, CatalogCommand.self, VerifyCatalogCommand.self, FetchCommand.self, TransporterCommand.self, RulesCommand.self, CompletionsCommand.self, ManCommand.self,
        ]
    }

    /// Every command's declaration, in the order `--help` lists them (completions and the man page read these).
    public static var specs: [CommandSpec] { commands.map { $0.spec } }

    static var overview: String {
        var text = """
            hcpack \(version): build, verify and install hosted content packages
            (a folder with ContentInfo.plist and Contents/, or an archive of one).

            Usage: hcpack COMMAND [options] [arguments]

            Commands:

            """
        let width = specs.map { $0.name.count }.max() ?? 0
        for spec in specs {
            text += "  " + spec.name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + spec.summary + "\n"
        }
        text += """

            Run 'hcpack help COMMAND' for a command's options, 'hcpack --version' for the version.
            With --json, a command prints exactly one JSON object on stdout, also when it fails (docs/json.md).
            Exit codes: 0 success, 1 invalid package (nothing written), 2 usage error, 3 I/O or environment failure.

            """
        return text
    }

    /// Runs hcpack with `arguments` (without the program name) and returns the exit code.
    public static func main(_ arguments: [String], context: Context) -> Int32 {
        guard let first = arguments.first else {
            context.err(overview)
            return ExitCode.usage
        }
        switch first {
        case "--help", "-h":
            context.out(overview)
            return ExitCode.success
        case "--version":
            context.out(versionText)
            return ExitCode.success
        case "help":
            guard let name = arguments.dropFirst().first else {
                context.out(overview)
                return ExitCode.success
            }
            if name == "help" {
                context.out("Usage: hcpack help [COMMAND]\nShows a command's options, or with no COMMAND the list of commands.\n")
                return ExitCode.success
            }
            guard let command = commands.first(where: { $0.spec.name == name }) else {
                return usageFailure(UsageError("unknown command '\(name)'"), context: context)
            }
            context.out(command.spec.help)
            return ExitCode.success
        default:
            break
        }
        guard let type = commands.first(where: { $0.spec.name == first }) else {
            return usageFailure(UsageError("unknown command '\(first)'; run 'hcpack --help' for the list"), context: context)
        }
        // Under --json, a failure the command did not report itself becomes one JSON object on stdout
        // (docs/json.md), unless the command already printed its object.
        var json = false
        let output = WrittenSink(context.standardOutput)
        do {
            let parsed = try ParsedArguments(Array(arguments.dropFirst()), spec: type.spec)
            if parsed.flag("help") {
                context.out(type.spec.help)
                return ExitCode.success
            }
            let command = try type.init(parsed, context: context)
            json = parsed.flag("json")
            var running = context
            running.standardOutput = output
            if json { JSONFailure.isOn = true }
            defer { JSONFailure.isOn = false }
            return try command.run(running)
        } catch let error as UsageError {
            return usageFailure(error, context: context)
        } catch let error as HCPackError {
            context.err("hcpack: error: \(error.message)\n")
            if json && !output.wrote { context.out(JSONFailure.object(error).rendered() + "\n") }
            return exitCode(for: error)
        } catch {
            let failure = HCPackError(.io, "\(error)")
            context.err("hcpack: error: \(failure.message)\n")
            if json && !output.wrote { context.out(JSONFailure.object(failure).rendered() + "\n") }
            return ExitCode.environment
        }
    }

    /// Makes a read that stalls inside libarchive (`ArchiveWatchdog`) end the process as an invalid archive
    /// does: "hcpack: error: [archive.stalled] ..." on standard error, exit 1. `HCPACK_STALL_SECONDS` sets the
    /// watchdog's time limit (default 30; 0 turns it off). Called once by `main.swift`.
    public static func installStallStop() {
        if let text = getenv("HCPACK_STALL_SECONDS").map({ String(cString: $0) }), let seconds = Int(text) {
            StalledRead.setDefaultStallSeconds(seconds)
        }
        StalledRead.onStop { message in
            let text = Array("hcpack: error: \(message)\n".utf8)
            _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            if JSONFailure.isOn {
                let object = Array((JSONFailure.object(HCPackError(.invalidPackage, message)).rendered() + "\n").utf8)
                _ = object.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            }
            _exit(ExitCode.invalid)
        }
    }

    /// Makes SIGBUS (a mapped file cut short by another process) end the process as an I/O failure: the message
    /// on standard error, with `json` the error object on standard output too, exit 3. Both are rendered here,
    /// before any file is mapped: the handler only writes them. Called once by `main.swift`.
    public static func installTruncationStop(json: Bool) {
        let message =
            "an archive or a file a patch applies to was truncated while hcpack was reading it (cut short by another program); nothing was put in place: an install's staging folder, or a delta's temporary folder beside its output, is removed by the next run; run the command again"
        truncationMessage = rendered("hcpack: error: \(message)\n")
        truncationObject = json ? rendered(JSONFailure.object(HCPackError(.io, message)).rendered() + "\n") : nil
        signal(SIGBUS) { _ in
            if let text = truncationMessage { _ = write(2, text.baseAddress, text.count) }
            if let object = truncationObject { _ = write(1, object.baseAddress, object.count) }
            _exit(ExitCode.environment)
        }
    }

    /// A copy of `text` that lives as long as the process, for a signal handler to write.
    private static func rendered(_ text: String) -> UnsafeBufferPointer<UInt8> {
        let bytes = Array(text.utf8)
        let copy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count)
        _ = copy.initialize(from: bytes)
        return UnsafeBufferPointer(copy)
    }

    /// The exit code for a failure.
    public static func exitCode(for error: HCPackError) -> Int32 {
        switch error.code {
        case .invalidPackage: ExitCode.invalid
        case .invalidRequest: ExitCode.usage
        case .notFound, .permissionDenied, .diskFull, .io, .locked: ExitCode.environment
        }
    }

    static func usageFailure(_ error: UsageError, context: Context) -> Int32 {
        context.err("hcpack: error: \(error.message)\n")
        if let name = error.command, let command = commands.first(where: { $0.spec.name == name }) {
            context.err("Usage: \(command.spec.usage)\nRun 'hcpack help \(name)' for more.\n")
        } else {
            context.err("Usage: hcpack COMMAND [options] [arguments]\nRun 'hcpack --help' for more.\n")
        }
        return ExitCode.usage
    }
}

/// What the SIGBUS handler writes, rendered before any file is mapped (a signal handler may not allocate).
nonisolated(unsafe) private var truncationMessage: UnsafeBufferPointer<UInt8>?
nonisolated(unsafe) private var truncationObject: UnsafeBufferPointer<UInt8>?
