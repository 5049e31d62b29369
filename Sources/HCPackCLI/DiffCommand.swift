import HostedContent

/// `hcpack diff OLD NEW`: which content files were added, removed or changed, and how the version moved.
struct DiffCommand: Command {
    static let spec = CommandSpec(
        name: "diff",
        summary: "Compare two packages: files added, removed, changed (by SHA-256); size and version change.",
        arguments: [
            ArgumentSpec("OLD", help: "The earlier package (folder or archive)."),
            ArgumentSpec("NEW", help: "The later package (folder or archive)."),
        ],
        options: [
            OptionSpec("json", help: "Print one JSON object on stdout."),
            OptionSpec("fail-on-downgrade", help: "Exit 1 when NEW's ContentVersion is lower than OLD's (equal passes)."),
        ],
        discussion: """
            Compares each package's Files list (or every regular file under Contents/ when Files is absent).
            Exit status: 0 compared (whatever the differences), 1 an input has no readable ContentInfo.plist or
            is a damaged archive, or --fail-on-downgrade and NEW's version is lower; 2 usage error; 3 unreadable input.
            """)

    let old: String, new: String
    let oldLabel: String, newLabel: String
    let json: Bool
    let failOnDowngrade: Bool

    init(_ arguments: ParsedArguments, context: Context) throws(UsageError) {
        oldLabel = arguments.argument(0) ?? ""
        newLabel = arguments.argument(1) ?? ""
        old = context.absolutePath(oldLabel)
        new = context.absolutePath(newLabel)
        json = arguments.flag("json")
        failOnDowngrade = arguments.flag("fail-on-downgrade")
    }

    func run(_ context: Context) throws(HCPackError) -> Int32 {
        let diff = try PackageComparer.diff(old: old, new: new)
        if json {
            context.out(Self.json(diff).rendered() + "\n")
        } else {
            context.out(Self.text(diff, oldLabel: oldLabel, newLabel: newLabel))
        }
        if failOnDowngrade && diff.versionChange == .downgrade {
            let oldVersion = diff.old.contentInfo.contentVersion ?? ""
            let newVersion = diff.new.contentInfo.contentVersion ?? ""
            context.err(
                "hcpack: error: \(newLabel): ContentVersion \(newVersion) is lower than \(oldLabel)'s \(oldVersion); raise NEW's ContentVersion\n"
            )
            return ExitCode.invalid
        }
        return ExitCode.success
    }

    static func signed(_ value: Int64) -> String { value > 0 ? "+\(value)" : String(value) }

    static func describe(_ side: DiffSide) -> String {
        let info = side.contentInfo
        let identity = [info.productIdentifier, info.contentVersion].compactMap { $0 }.map(PackagePath.printable).joined(
            separator: " ")
        let basis = side.usesFilesList ? "Files list" : "all files under Contents/"
        var delta = side.delta.map { "; a delta from \($0.baseVersion), counted as the full version" } ?? ""
        if !side.leftInPlace.isEmpty {
            delta += "; \(ReportRendering.plural(side.leftInPlace.count, "file")) it leaves in place not compared: the other side is not its base"
        }
        return
            "\(identity.isEmpty ? "no identity" : identity); \(ReportRendering.plural(side.files.count, "file")), \(side.bytes) bytes (\(basis)\(delta))"
    }

    static func text(_ diff: PackageDiff, oldLabel: String, newLabel: String) -> String {
        var text = "old: \(oldLabel) (\(describe(diff.old)))\n"
        text += "new: \(newLabel) (\(describe(diff.new)))\n"
        if !diff.sameProduct {
            text += "note: the product identifiers differ; these may not be two releases of one product\n"
        }
        let oldVersion = diff.old.contentInfo.contentVersion ?? "(none)"
        let newVersion = diff.new.contentInfo.contentVersion ?? "(none)"
        let verdict: String
        switch diff.versionChange {
        case .upgrade: verdict = "upgrade: NEW is greater"
        case .same: verdict = "same version"
        case .downgrade: verdict = "DOWNGRADE: NEW is lower"
        case .unknown: verdict = "not comparable: a version is missing or malformed"
        }
        text += "version: \(PackagePath.printable(oldVersion)) -> \(PackagePath.printable(newVersion)) (\(verdict))\n"
        // A delta's patched files (NEW a delta): what each patch weighs against the whole file.
        let patched = Dictionary(FilePatch.summaries(of: diff.new.contentInfo).map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        for change in diff.changes where change.kind != .unchanged {
            let path = PackagePath.printable(change.path)
            switch change.kind {
            case .added: text += "added    \(path) (\(change.newSize ?? 0) bytes)\n"
            case .removed: text += "removed  \(path) (\(change.oldSize ?? 0) bytes)\n"
            case .changed:
                let patch = patched[change.path].map { "; a \($0.patchSize)-byte patch\($0.group.map { " (share of patch group \($0))" } ?? ""), saves \($0.saved)" } ?? ""
                text += "changed  \(path) (\(change.oldSize ?? 0) -> \(change.newSize ?? 0) bytes\(patch))\n"
            case .unchanged: break
            }
        }
        let counts = FileChangeKind.allCases.map { "\(diff.files($0).count) \($0.rawValue)" }.joined(separator: ", ")
        text += "summary: \(counts); size \(signed(diff.sizeDelta)) bytes\n"
        return text
    }

    static func side(_ side: DiffSide) -> JSONValue {
        let object: JSONValue = .object([
            ("path", .string(side.path)),
            ("productIdentifier", side.contentInfo.productIdentifier.map(JSONValue.string) ?? .null),
            ("contentVersion", side.contentInfo.contentVersion.map(JSONValue.string) ?? .null),
            ("usesFilesList", .bool(side.usesFilesList)),
            ("files", .number(Int64(side.files.count))),
            ("bytes", .number(side.bytes)),
            ("deltaBaseVersion", side.delta.map { .string($0.baseVersion) } ?? .null),
        ])
        // A delta's patched files (issue 32) and the files it leaves in place unresolved, only for a delta.
        guard side.delta != nil else { return object }
        return object.appending("patched", .array(FilePatch.summaries(of: side.contentInfo).map(DeltaCommand.json)))
            .appending("notCompared", .array(side.leftInPlace.map(JSONValue.string)))
    }

    static func json(_ diff: PackageDiff) -> JSONValue {
        func optional(_ value: Int64?) -> JSONValue { value.map(JSONValue.number) ?? .null }
        func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        func files(_ kind: FileChangeKind) -> JSONValue {
            .array(
                diff.files(kind).map { change in
                    switch kind {
                    case .added:
                        .object([
                            ("path", .string(change.path)), ("size", optional(change.newSize)),
                            ("sha256", optional(change.newSHA256)),
                        ])
                    case .removed, .unchanged:
                        .object([
                            ("path", .string(change.path)), ("size", optional(change.oldSize)),
                            ("sha256", optional(change.oldSHA256)),
                        ])
                    case .changed:
                        .object([
                            ("path", .string(change.path)), ("oldSize", optional(change.oldSize)),
                            ("newSize", optional(change.newSize)),
                            ("oldSHA256", optional(change.oldSHA256)), ("newSHA256", optional(change.newSHA256)),
                        ])
                    }
                })
        }
        return .object([
            ("old", side(diff.old)),
            ("new", side(diff.new)),
            ("sameProduct", .bool(diff.sameProduct)),
            (
                "version",
                .object([
                    ("old", optional(diff.old.contentInfo.contentVersion)),
                    ("new", optional(diff.new.contentInfo.contentVersion)),
                    ("change", .string(diff.versionChange.rawValue)), ("newIsGreater", .bool(diff.versionChange == .upgrade)),
                ])
            ),
            ("sizeDelta", .number(diff.sizeDelta)),
            ("counts", .object(FileChangeKind.allCases.map { ($0.rawValue, .number(Int64(diff.files($0).count))) })),
            ("added", files(.added)),
            ("removed", files(.removed)),
            ("changed", files(.changed)),
            ("unchanged", files(.unchanged)),
        ])
    }
}
