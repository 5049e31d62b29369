import HostedContent

/// `hcpack transporter ARCHIVE --vendor-id ID -o DIR.itmsp`: the upload folder Apple's Transporter takes.
struct TransporterCommand: Command {
    static let spec = CommandSpec(
        name: "transporter",
        summary: "Write a Transporter upload folder (NAME.itmsp: metadata.xml and the package archive).",
        arguments: [ArgumentSpec("ARCHIVE", help: "A package archive (hcpack build makes one); it must verify.")],
        options: [
            OptionSpec("vendor-id", value: "ID", required: true, help: "The app's vendor ID (SKU) in App Store Connect."),
            OptionSpec("output", short: "o", value: "DIR", required: true, help: "The folder to write; its name must end in .itmsp."),
            OptionSpec("force", help: "Replace the output folder when it exists."),
            OptionSpec("json", help: "Print one JSON object on stdout."),
        ],
        discussion: """
            The archive is verified first; with errors nothing is written. metadata.xml comes from
            Templates/transporter-metadata.xml ($HCPACK_TEMPLATES overrides); parts of its element layout are not
            confirmed by Apple's public documentation (docs/transporter.md).
            Exit status: 0 written, 1 the archive is invalid, 2 usage error (also: output exists without --force),
            3 I/O or environment failure.
            """)

    let archive: String
    let vendorID: String
    let output: String
    let force: Bool
    let json: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        archive = context.absolutePath(arguments.argument(0) ?? "")
        guard let vendorID = arguments.value("vendor-id") else {
            throw UsageError("missing option --vendor-id ID (the app's SKU in App Store Connect)", command: Self.spec.name)
        }
        guard let output = arguments.value("output") else {
            throw UsageError("missing option -o DIR.itmsp (the folder to write)", command: Self.spec.name)
        }
        self.vendorID = vendorID
        self.output = context.absolutePath(output)
        force = arguments.flag("force")
        json = arguments.flag("json")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let template = try TemplateLocator.locate(
            "transporter-metadata.xml", environment: context.environment, executablePath: InitCommand.executablePath())
        let request = TransporterRequest(
            archivePath: archive, vendorID: vendorID, outputPath: output, force: force, templatePath: template)
        let result = try TransporterPackage.write(request)
        if json {
            context.out(
                JSONValue.object([
                    ("written", .bool(result.written)),
                    ("output", result.written ? .string(output) : .null),
                    ("fileName", .string(result.fileName)),
                    ("size", .number(result.size)),
                    ("md5", result.written ? .string(result.md5) : .null),
                    ("verification", ReportRendering.json(result.report, strict: false)),
                ]).rendered() + "\n")
        } else if result.written {
            context.out("\(output): metadata.xml and \(result.fileName) (\(result.size) bytes, MD5 \(result.md5))\n")
        } else {
            context.out(ReportRendering.text(result.report, label: archive, strict: false))
        }
        if !result.written {
            context.err(
                "hcpack: error: \(archive) is invalid, so nothing was written; fix the errors above and rebuild the archive\n")
            return ExitCode.invalid
        }
        return ExitCode.success
    }
}
