import Foundation
import HostedContent

/// `hcpack init DIR --product-id ID`: a package folder to fill, from the installed templates.
struct InitCommand: Command {
    static let spec = CommandSpec(
        name: "init",
        summary: "Create a package folder: a commented ContentInfo.plist and an empty Contents/.",
        arguments: [ArgumentSpec("DIR", help: "The package folder to create (it may exist if empty).")],
        options: [
            OptionSpec("product-id", value: "ID", required: true, help: "IAPProductIdentifier: letters, digits, '.', '-', '_'."),
            OptionSpec("content-version", value: "V", help: "ContentVersion (default \(PackageTemplate.defaultContentVersion))."),
            OptionSpec(
                "templates", value: "DIR",
                help: "Folder holding the ContentInfo.plist template (default: $HCPACK_TEMPLATES, else the installed one)."),
            OptionSpec("force", help: "Add the package to a non-empty folder (existing files are never overwritten)."),
            OptionSpec("quiet", short: "q", help: "Print only errors."),
        ],
        discussion: """
            The plist has no Files key: 'hcpack build' lists every file under Contents/ and records its size and
            SHA-256. Put your content in Contents/, then run 'hcpack build DIR'.
            Exit status: 0 created, 2 usage error (bad identifier or version, DIR in the way), 3 I/O failure.
            """)

    let directory: String
    let productIdentifier: String
    let contentVersion: String
    let templates: String?
    let force: Bool
    let quiet: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        directory = context.absolutePath(arguments.argument(0) ?? "")
        guard let identifier = arguments.value("product-id") else {
            throw UsageError(
                "--product-id is required (the in-app purchase's identifier, e.g. com.example.levels)", command: Self.spec.name)
        }
        productIdentifier = identifier
        contentVersion = arguments.value("content-version") ?? PackageTemplate.defaultContentVersion
        templates = arguments.value("templates").map(context.absolutePath)
        force = arguments.flag("force")
        quiet = arguments.flag("quiet")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let template = try PackageTemplate.locate(
            explicit: templates, environment: context.environment, executablePath: Self.executablePath())
        try template.scaffold(directory, productIdentifier: productIdentifier, contentVersion: contentVersion, force: force)
        if !quiet {
            context.out(
                """
                created \(directory)/\(ContentInfo.fileName) (\(productIdentifier) \(contentVersion)) and \(directory)/Contents/
                next: put the content files in Contents/, then run: hcpack build \(directory)

                """)
        }
        return ExitCode.success
    }

    /// This program's path: /proc/self/exe (symlinks resolved), else argv[0] made absolute.
    static func executablePath() -> String? {
        if let resolved = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return resolved }
        guard let first = CommandLine.arguments.first, first.contains("/") else { return nil }
        return first.hasPrefix("/") ? first : FileManager.default.currentDirectoryPath + "/" + first
    }
}
