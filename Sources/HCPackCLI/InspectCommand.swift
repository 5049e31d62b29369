import Foundation
import HostedContent

/// `hcpack inspect PATH`: what a package is and holds, with every file's size and SHA-256.
struct InspectCommand: Command {
    static let spec = CommandSpec(
        name: "inspect",
        summary: "Show a package's identity, plist keys, files with sizes and SHA-256, and totals.",
        arguments: [
            ArgumentSpec(
                "PATH", help: "A package folder, an archive (zip, tar, tar.gz/bz2/xz/zst) or a folder hcpack installed into.")
        ],
        options: [OptionSpec("json", help: "Print one JSON object on stdout.")],
        discussion: """
            Every file is read and hashed. For archives the compression ratio is archive-level: the archive
            file's size divided by the uncompressed bytes of every file in the package (docs/inspect-and-diff.md).
            For an install destination, each installed product's version, files and signers (from its receipt).
            Exit status: 0 shown, 1 no readable ContentInfo.plist (not a package), 3 unreadable input.
            """)

    let path: String
    let label: String
    let json: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        label = arguments.argument(0) ?? ""
        path = context.absolutePath(label)
        json = arguments.flag("json")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        if let receipts = try InstallReceipt.installed(in: path) {
            let shown = json ? Self.json(receipts: receipts, path: path).rendered() + "\n" : Self.text(receipts: receipts, label: label)
            context.out(shown)
            return ExitCode.success
        }
        let inspection = try Inspector.inspect(path)
        if json {
            let delta = inspection.report.deltaBase.map { Self.json($0, inspection) } ?? .null
            context.out(Self.json(inspection, path: path).appending("delta", delta).rendered() + "\n")
        } else {
            context.out(Self.text(inspection, label: label))
        }
        guard inspection.contentInfo != nil else {
            context.err(
                "hcpack: error: \(label): no readable ContentInfo.plist, so this is not a package; run 'hcpack verify \(label)' to see why\n"
            )
            return ExitCode.invalid
        }
        return ExitCode.success
    }

    /// Keys shown in their own fields rather than under "other keys".
    static let ownKeys: Set<String> = [
        ContentInfo.productIdentifierKey, ContentInfo.contentVersionKey, ContentInfo.filesKey, ContentInfo.integrityKey, DeltaBase.key, FilePatch.key, PatchGroup.key,
    ]

    /// The files a delta carries whole: its files under Contents/ but its patch entries (a file's own or a
    /// group's), which `patched` shows instead.
    static func carriedWhole(_ inspection: PackageInspection) -> Int {
        inspection.files.count { !$0.path.hasPrefix(FilePatch.folder + "/") }
    }

    static func source(_ inspection: PackageInspection) -> (kind: String, format: String?) {
        switch inspection.report.snapshot.origin {
        case .folder: ("folder", nil)
        case .archive(_, let format): ("archive", format)
        }
    }

    static func text(_ inspection: PackageInspection, label: String) -> String {
        let info = inspection.contentInfo
        let report = inspection.report
        var text = "\(label)\n"
        text += "  Product:      \(info?.productIdentifier.map(PackagePath.printable) ?? "(none)")\n"
        text += "  Version:      \(info?.contentVersion.map(PackagePath.printable) ?? "(none)")\n"
        let (kind, format) = source(inspection)
        if kind == "archive" {
            text += "  Source:       \(format ?? "unknown") archive, \(inspection.archiveBytes ?? 0) bytes\n"
        } else {
            text += "  Source:       folder\n"
        }
        text += "  Package root: \(inspection.root.summary)\n"
        let verdict = report.isValid() ? "valid" : "INVALID"
        text += "  Verification: \(verdict), \(ReportRendering.plural(report.problems.errorCount, "error")), "
        text += "\(ReportRendering.plural(report.problems.warningCount, "warning")) (hcpack verify lists them)\n"
        if let info {
            let listed = info.files.map { "\($0.count) paths" } ?? "absent"
            text += "  Files list:   \(listed)\n"
            let records = (try? info.parseIntegrity()).flatMap { $0 }.map { "\($0.count) records" } ?? "absent"
            text += "  Integrity:    \(records)\n"
            if let delta = report.deltaBase {
                let fromBase = Self.fromBase(inspection)
                text += "  Delta:        from version \(delta.baseVersion) (its plist's SHA-256 \(delta.basePlistSHA256)); carries "
                let patched = FilePatch.summaries(of: info)
                // The patch entries (a file's own, or a group's) are files under Contents/ too.
                text += "\(Self.carriedWhole(inspection)) of \(info.files?.count ?? 0) listed files, \(patched.count) as patches, "
                text += "\(fromBase.count) come from the installed base\n"
                for patch in patched {
                    text += "    patched \(PackagePath.printable(patch.path)): \(DeltaCommand.text(patch))\n"
                }
            }
            var others = info.dictionary
            for key in ownKeys { others[key] = nil }
            if others.entries.isEmpty {
                text += "  Other keys:   (none)\n"
            } else {
                text += "  Other keys:\n" + PlistRendering.text(others, indent: "    ")
            }
        }
        text += "\nFiles under Contents/:\n"
        if inspection.files.isEmpty {
            text += "  (none)\n"
        } else {
            let width = max(4, inspection.files.map { String($0.size).count }.max() ?? 0)
            text +=
                "  " + String(repeating: " ", count: width - 4) + "SIZE  SHA-256" + String(repeating: " ", count: 59) + "PATH\n"
            let hasFilesList = info?.files != nil
            for file in inspection.files {
                let size = String(file.size)
                text += "  " + String(repeating: " ", count: width - size.count) + size + "  " + file.sha256 + "  "
                text += PackagePath.printable(file.path) + (hasFilesList && !file.isListed ? "  (not in Files)" : "") + "\n"
            }
        }
        text += "\nTotals: \(ReportRendering.plural(inspection.files.count, "file")), \(inspection.contentBytes) content bytes, "
        text += "\(inspection.packageBytes) package bytes"
        if let archiveBytes = inspection.archiveBytes {
            text += ", \(archiveBytes) archive bytes"
            if let ratio = inspection.compressionRatio {
                text += String(format: ", compression ratio %.3f (archive size / package bytes)", ratio)
            }
        }
        return text + "\n"
    }

    /// A delta's listed files that it does not carry: the installed base must hold them.
    static func fromBase(_ inspection: PackageInspection) -> [String] {
        let patched = inspection.contentInfo.map { FilePatch.summaries(of: $0).map(\.path) } ?? []
        let carried = Set(inspection.files.map(\.path) + patched)
        return (inspection.contentInfo?.files ?? []).filter { !carried.contains($0) }.sorted()
    }

    /// `delta` in inspect's JSON, for a delta package.
    static func json(_ delta: DeltaBase, _ inspection: PackageInspection) -> JSONValue {
        .object([
            ("baseVersion", .string(delta.baseVersion)), ("basePlistSHA256", .string(delta.basePlistSHA256)),
            ("targetPlistSHA256", .string(delta.targetPlistSHA256)), ("carried", .number(Int64(Self.carriedWhole(inspection)))),
            ("fromBase", .array(fromBase(inspection).map(JSONValue.string))),
            ("patched", .array((inspection.contentInfo.map(FilePatch.summaries) ?? []).map(DeltaCommand.json))),
        ])
    }

    static func json(_ inspection: PackageInspection, path: String) -> JSONValue {
        let info = inspection.contentInfo
        let report = inspection.report
        let (kind, format) = source(inspection)
        var others: JSONValue = .null
        if var dictionary = info?.dictionary {
            for key in ownKeys { dictionary[key] = nil }
            others = PlistRendering.json(dictionary)
        }
        let root: JSONValue
        switch inspection.root {
        case .folder: root = .object([("kind", .string("folder")), ("name", .null)])
        case .archiveRoot: root = .object([("kind", .string("archive-root")), ("name", .null)])
        case .archiveFolder(let name): root = .object([("kind", .string("top-level-folder")), ("name", .string(name))])
        }
        return .object([
            ("path", .string(path)),
            ("source", .object([("kind", .string(kind)), ("format", format.map(JSONValue.string) ?? .null)])),
            ("root", root),
            ("productIdentifier", info?.productIdentifier.map(JSONValue.string) ?? .null),
            ("contentVersion", info?.contentVersion.map(JSONValue.string) ?? .null),
            ("filesListed", .bool(info?.files != nil)),
            ("otherKeys", others),
            (
                "verification",
                .object([
                    ("valid", .bool(report.isValid())), ("errors", .number(Int64(report.problems.errorCount))),
                    ("warnings", .number(Int64(report.problems.warningCount))),
                ])
            ),
            (
                "files",
                .array(
                    inspection.files.map { file in
                        .object([
                            ("path", .string(file.path)), ("size", .number(file.size)), ("sha256", .string(file.sha256)),
                            ("listed", .bool(file.isListed)),
                        ])
                    })
            ),
            (
                "totals",
                .object([
                    ("files", .number(Int64(inspection.files.count))), ("contentBytes", .number(inspection.contentBytes)),
                    ("packageBytes", .number(inspection.packageBytes)),
                    ("archiveBytes", inspection.archiveBytes.map(JSONValue.number) ?? .null),
                    ("compressionRatio", inspection.compressionRatio.map(JSONValue.double) ?? .null),
                ])
            ),
        ])
    }
}
