import ArchiveIO

/// What `hcpack build` writes.
public enum BuildFormat: String, Sendable, CaseIterable {
    /// A zip archive, each entry stored or deflated (`CompressionPolicy`).
    case zip
    /// A pax tar archive compressed as one gzip stream.
    case tarGzip = "tar.gz"
    /// A package folder.
    case directory = "dir"

    /// The extension a default output name gets ("" for a folder).
    public var fileExtension: String {
        switch self {
        case .zip: ".zip"
        case .tarGzip: ".tar.gz"
        case .directory: ""
        }
    }

    /// The format an output name implies by its extension (`.zip`, `.tar.gz`, `.tgz`), or nil.
    public static func implied(byOutput path: String) -> BuildFormat? {
        let name = path.split(separator: "/").last.map { $0.lowercased() } ?? ""
        if name.hasSuffix(".zip") { return .zip }
        if name.hasSuffix(".tar.gz") || name.hasSuffix(".tgz") { return .tarGzip }
        return nil
    }
}

/// How an archive is laid out.
public enum ArchiveLayout: Sendable {
    /// An entry for each folder, the plist indented: what Apple's tools and every zip reader expect.
    case package
    /// No folder entries (install places only listed files, and every zip reader makes a file's folders) and
    /// the plist without indentation: on the bench's json delta, 662 and 100 bytes of 6,164 (bench/README.md).
    case delta
}

/// Everything `Builder` needs to know about one build.
public struct BuildOptions: Sendable {
    /// The zip epoch, 1980-01-01T00:00:00Z: every entry's timestamp unless `SOURCE_DATE_EPOCH` says otherwise.
    public static let defaultSourceDateEpoch: Int64 = 315_532_800

    /// A package folder (ContentInfo.plist and/or Contents/ at its root) or a plain folder of content.
    public var source: String
    /// Where to write; nil for `<product-id>-<version><extension>` in `defaultOutputFolder`.
    public var output: String?
    /// The folder of the default output name (the current folder, for the command line).
    public var defaultOutputFolder: String
    /// nil: implied by `output`'s extension, else zip.
    public var format: BuildFormat?
    /// Required for a plain folder; overrides the plist's value for a package folder.
    public var productIdentifier: String?
    /// Required for a plain folder; overrides the plist's value for a package folder.
    public var contentVersion: String?
    /// Zip entries only; tar.gz compresses the whole stream.
    public var compression: CompressionPolicy
    /// fnmatch(3) patterns, matched against each path relative to Contents/ and against each name in it.
    public var excludes: [String]
    /// The timestamp of every entry, in seconds since 1970.
    public var sourceDateEpoch: Int64
    /// Replace an existing output.
    public var force: Bool
    /// The rules' settings for validating the would-be package.
    public var verify: VerifyOptions
    /// How the archive is laid out: a package's, or a delta's, which only hcpack reads.
    public var layout = ArchiveLayout.package
    /// The source's contents, held in memory: `source` is then only the package's name in messages. Zip with
    /// deflate or auto compression, files of at most `PreparedEntries.largestFile` (a small delta's).
    var memorySource: PackageScanner.MemoryPackage?

    /// Describes a build; everything but the source has a default.
    public init(
        source: String, output: String? = nil, defaultOutputFolder: String = ".", format: BuildFormat? = nil,
        productIdentifier: String? = nil, contentVersion: String? = nil, compression: CompressionPolicy = .auto,
        excludes: [String] = [], sourceDateEpoch: Int64 = BuildOptions.defaultSourceDateEpoch, force: Bool = false,
        verify: VerifyOptions = VerifyOptions()
    ) {
        self.source = source
        self.output = output
        self.defaultOutputFolder = defaultOutputFolder
        self.format = format
        self.productIdentifier = productIdentifier
        self.contentVersion = contentVersion
        self.compression = compression
        self.excludes = excludes
        self.sourceDateEpoch = sourceDateEpoch
        self.force = force
        self.verify = verify
    }
}

/// An entry of the source that the built package leaves out, and why.
public struct ExcludedEntry: Sendable, Hashable {
    /// Why an entry is left out.
    public enum Reason: Sendable, Hashable {
        /// Operating-system or version-control junk (.DS_Store, __MACOSX/, ._*, Thumbs.db, .git/).
        case junk
        /// Matched an `--exclude` pattern.
        case pattern(String)
        /// A symlink: installers copy regular files only.
        case symlink
        /// At the package root beside ContentInfo.plist and Contents/, where nothing else belongs.
        case outsideContents
        /// The build's own output (or a temporary of it), inside the source folder.
        case buildOutput

        /// Words for a note line.
        public var explanation: String {
            switch self {
            case .junk: "operating system junk"
            case .pattern(let pattern): "matches --exclude '\(pattern)'"
            case .symlink: "a symlink; put the file itself there to ship it"
            case .outsideContents: "outside Contents/; move it into Contents/ to ship it"
            case .buildOutput: "the output of this build"
            }
        }
    }

    /// Path relative to the built package's root ("Contents/.DS_Store").
    public var path: String
    /// Why it is left out.
    public var reason: Reason

    /// Names an entry left out.
    public init(path: String, reason: Reason) {
        self.path = path
        self.reason = reason
    }
}

/// What a finished build wrote.
public struct BuildResult: Sendable {
    /// The output path.
    public var output: String
    /// What was written.
    public var format: BuildFormat
    /// IAPProductIdentifier of the built plist.
    public var productIdentifier: String
    /// ContentVersion of the built plist.
    public var contentVersion: String
    /// Regular files written under Contents/.
    public var fileCount: Int
    /// Their total size.
    public var contentBytes: Int64
    /// Size of the archive (for a folder: ContentInfo.plist plus content bytes).
    public var outputBytes: Int64
    /// Lowercase hex SHA-256 of the archive; nil for a folder.
    public var sha256: String?
    /// What was left out.
    public var excluded: [ExcludedEntry]
    /// Warnings from validation (errors stop a build before anything is written).
    public var problems: ProblemList
}
