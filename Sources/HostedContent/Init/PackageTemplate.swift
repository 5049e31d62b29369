import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `Templates/` folder `hcpack init` scaffolds from: a commented ContentInfo.plist with placeholders.
public struct PackageTemplate: Sendable {
    /// The environment variable naming a templates folder.
    public static let environmentVariable = "HCPACK_TEMPLATES"
    /// Replaced by the product identifier.
    public static let productIdentifierPlaceholder = "{{PRODUCT_ID}}"
    /// Replaced by the content version.
    public static let contentVersionPlaceholder = "{{CONTENT_VERSION}}"
    /// The version `init` writes unless told otherwise.
    public static let defaultContentVersion = "1.0"
    /// `Templates/` in the source tree this file was compiled from (found when running from a checkout).
    public static let sourceTreeFolder =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Templates").path

    /// The folder holding the template files.
    public let folder: String

    /// Uses `folder` as is; `locate` finds one.
    public init(folder: String) {
        self.folder = folder
    }

    /// Where an installed hcpack keeps its templates: `<executable's folder>/../share/hcpack/Templates`.
    public static func installedFolder(executablePath: String) -> String {
        let bin = URL(fileURLWithPath: executablePath).deletingLastPathComponent()
        return bin.deletingLastPathComponent().appendingPathComponent("share/hcpack/Templates").path
    }

    /// Finds the templates: `explicit` (--templates), then `$HCPACK_TEMPLATES`, then the installed layout
    /// beside `executablePath`, then the source tree. A folder named by the option or the variable must hold
    /// the template; the other two are tried quietly.
    /// - Throws: `HCPackError` `.notFound`, naming every folder tried.
    public static func locate(
        explicit: String? = nil, environment: [String: String] = [:], executablePath: String?,
        sourceTree: String? = PackageTemplate.sourceTreeFolder
    ) throws(HCPackError) -> PackageTemplate {
        if let explicit { return try required(explicit, origin: "--templates") }
        if let named = environment[environmentVariable], !named.isEmpty {
            return try required(named, origin: environmentVariable)
        }
        var tried: [String] = []
        for candidate in [executablePath.map(installedFolder(executablePath:)), sourceTree].compactMap({ $0 }) {
            if holdsTemplate(candidate) { return PackageTemplate(folder: candidate) }
            tried.append(candidate)
        }
        throw HCPackError(
            .notFound,
            "no package template found (looked in \(tried.joined(separator: ", "))); set \(environmentVariable) to a folder holding \(ContentInfo.fileName), or reinstall hcpack",
            path: tried.first)
    }

    private static func required(_ folder: String, origin: String) throws(HCPackError) -> PackageTemplate {
        guard holdsTemplate(folder) else {
            throw HCPackError(
                .notFound,
                "\(folder) (from \(origin)) has no \(ContentInfo.fileName) template; point \(origin) at hcpack's Templates folder",
                path: folder)
        }
        return PackageTemplate(folder: folder)
    }

    private static func holdsTemplate(_ folder: String) -> Bool {
        (try? FileSystem.status(folder + "/" + ContentInfo.fileName))??.kind == .file
    }

    /// The template's ContentInfo.plist with the placeholders filled in, checked to parse.
    /// - Throws: `HCPackError` when the template cannot be read or does not give a plist.
    public func renderContentInfo(productIdentifier: String, contentVersion: String) throws(HCPackError) -> [UInt8] {
        let path = folder + "/" + ContentInfo.fileName
        let bytes = try FileSystem.readFile(path, limit: 1 << 20)
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw HCPackError(.io, "\(path): the template is not UTF-8; reinstall hcpack's templates", path: path)
        }
        let rendered = Array(
            text.replacingOccurrences(of: Self.productIdentifierPlaceholder, with: xmlEscaped(productIdentifier))
                .replacingOccurrences(of: Self.contentVersionPlaceholder, with: xmlEscaped(contentVersion)).utf8)
        do {
            let info = try ContentInfo.decode(rendered)
            guard info.productIdentifier == productIdentifier, info.contentVersion == contentVersion else {
                throw HCPackError(
                    .io,
                    "\(path): the template lacks the \(Self.productIdentifierPlaceholder) or \(Self.contentVersionPlaceholder) placeholder; reinstall hcpack's templates",
                    path: path)
            }
        } catch let error as HCPackError {
            throw error
        } catch {
            throw HCPackError(
                .io, "\(path): the template does not give a valid plist (\(error)); reinstall hcpack's templates", path: path)
        }
        return rendered
    }

    private func xmlEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(
            of: ">", with: "&gt;")
    }

    /// Creates a package folder: `directory/ContentInfo.plist` from the template and an empty `Contents/`.
    ///
    /// Never overwrites: an existing non-empty folder is refused unless `force`, and even then an existing
    /// ContentInfo.plist is refused.
    /// - Returns: the paths created.
    /// - Throws: `HCPackError` `.invalidRequest` for a bad identifier or version or a folder in the way;
    ///   system errors when writing fails.
    @discardableResult
    public func scaffold(
        _ directory: String, productIdentifier: String, contentVersion: String = PackageTemplate.defaultContentVersion,
        force: Bool = false
    ) throws(HCPackError) -> [String] {
        guard ContentInfo.isValidProductIdentifier(productIdentifier) else {
            throw HCPackError(
                .invalidRequest,
                "product identifier '\(PackagePath.printable(productIdentifier))' must be 1 to 100 letters, digits, '.', '-' or '_' (e.g. com.example.levels)"
            )
        }
        guard ContentVersion(contentVersion) != nil else {
            throw HCPackError(
                .invalidRequest,
                "content version '\(PackagePath.printable(contentVersion))' must be integers separated by periods (1, 1.0, 2.10.3)"
            )
        }
        let plistPath = directory + "/" + ContentInfo.fileName
        let contentsPath = directory + "/Contents"
        if let status = try FileSystem.status(directory) {
            guard status.kind == .directory else {
                throw HCPackError(
                    .invalidRequest, "\(directory) exists and is not a folder; choose another path", path: directory)
            }
            if FileSystem.exists(plistPath) {
                throw HCPackError(
                    .invalidRequest, "\(plistPath) already exists; hcpack init never overwrites it (edit it, or remove it first)",
                    path: plistPath)
            }
            if !force, !(try FileSystem.listDirectory(directory)).isEmpty {
                throw HCPackError(
                    .invalidRequest, "\(directory) is not empty; use --force to add a package there (existing files are kept)",
                    path: directory)
            }
            if let contents = try FileSystem.status(contentsPath), contents.kind != .directory {
                throw HCPackError(
                    .invalidRequest, "\(contentsPath) exists and is not a folder; move it away first", path: contentsPath)
            }
        }
        let rendered = try renderContentInfo(productIdentifier: productIdentifier, contentVersion: contentVersion)

        var created: [String] = []
        if !FileSystem.exists(directory) {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw HCPackError(.io, "\(directory): cannot create the folder (\(error.localizedDescription))", path: directory)
            }
            created.append(directory)
        }
        try Self.createFile(plistPath, bytes: rendered)
        created.append(plistPath)
        if !FileSystem.exists(contentsPath) {
            guard mkdir(contentsPath, 0o755) == 0 else { throw HCPackError.system("mkdir", path: contentsPath, errno: errno) }
            created.append(contentsPath)
        }
        return created
    }

    /// Writes a new file (O_EXCL: never replaces one) and syncs it.
    private static func createFile(_ path: String, bytes: [UInt8]) throws(HCPackError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard descriptor >= 0 else { throw HCPackError.system("create", path: path, errno: errno) }
        defer { close(descriptor) }
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                let code = errno
                unlink(path)
                throw HCPackError.system("write", path: path, errno: code)
            }
            offset += count
        }
        guard fsync(descriptor) == 0 else { throw HCPackError.system("fsync", path: path, errno: errno) }
    }
}
