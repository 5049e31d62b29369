import Digest
import Foundation


/// What `TransporterPackage.write` needs: the package archive, the app's vendor ID, where to write.
public struct TransporterRequest: Sendable {
    /// A package archive (zip or tar); folders are refused.
    public var archivePath: String
    /// The app's vendor ID (SKU) in App Store Connect.
    public var vendorID: String
    /// The `.itmsp` folder to create.
    public var outputPath: String
    /// Replace `outputPath` when it exists.
    public var force: Bool
    /// The metadata.xml template (`Templates/transporter-metadata.xml`).
    public var templatePath: String
    /// Verification settings for the archive.
    public var verifyOptions: VerifyOptions

    /// Creates a request.
    public init(
        archivePath: String, vendorID: String, outputPath: String, force: Bool = false, templatePath: String,
        verifyOptions: VerifyOptions = VerifyOptions()
    ) {
        self.archivePath = archivePath
        self.vendorID = vendorID
        self.outputPath = outputPath
        self.force = force
        self.templatePath = templatePath
        self.verifyOptions = verifyOptions
    }
}

/// The outcome of `TransporterPackage.write`.
public struct TransporterResult: Sendable {
    /// The verification of the archive; when it has errors nothing was written.
    public var report: VerificationReport
    /// True when the `.itmsp` folder was written.
    public var written: Bool
    /// The archive's name inside the `.itmsp` folder.
    public var fileName: String
    /// The archive's size in bytes (zero when nothing was written).
    public var size: Int64
    /// The archive's MD5, lowercase hexadecimal (empty when nothing was written).
    public var md5: String
}

/// Writes the upload folder (`NAME.itmsp`: metadata.xml plus the package archive) that Apple's Transporter takes.
public enum TransporterPackage {
    /// Placeholders the template may use.
    public static let placeholders = ["VENDOR_ID", "PRODUCT_ID", "CONTENT_VERSION", "FILE_NAME", "FILE_SIZE", "MD5"]

    /// Verifies the archive, then writes `metadata.xml` and a copy of the archive into a temporary folder beside
    /// the output and renames it into place, so the output is either complete or absent.
    /// - Returns: the result; `written` is false (and nothing was written) when the archive has errors.
    /// - Throws: `HCPackError` `.invalidRequest` for a bad request (folder input, bad vendor ID, output exists
    ///   without `force`, output not named `.itmsp`), `.notFound`/`.io`/... for environment failures.
    public static func write(_ request: TransporterRequest) throws(HCPackError) -> TransporterResult {
        let archive = request.archivePath
        guard request.outputPath.hasSuffix(".itmsp") else {
            throw HCPackError(
                .invalidRequest, "\(request.outputPath): Transporter expects a folder named NAME.itmsp; add the .itmsp extension",
                path: request.outputPath)
        }
        guard isValidVendorID(request.vendorID) else {
            throw HCPackError(
                .invalidRequest,
                "vendor ID '\(PackagePath.printable(request.vendorID))' must be 1 to 100 letters, digits, '.', '-' or '_' (the app's SKU in App Store Connect)"
            )
        }
        guard let status = try FileSystem.status(archive) else {
            throw HCPackError(.notFound, "\(archive): no such file; check the path", path: archive)
        }
        guard status.kind == .file else {
            throw HCPackError(
                .invalidRequest,
                "\(archive): is a \(status.kind.noun); Transporter uploads a package archive, make one with hcpack build",
                path: archive)
        }
        let outputExists = FileSystem.exists(request.outputPath)
        if outputExists && !request.force {
            throw HCPackError(
                .invalidRequest, "\(request.outputPath) already exists; pass --force to replace it", path: request.outputPath)
        }
        let fileName = URL(fileURLWithPath: archive).lastPathComponent
        let report = try Verifier.verify(archive, options: request.verifyOptions)
        guard report.isValid(), let info = report.contentInfo, let productID = info.productIdentifier else {
            return TransporterResult(report: report, written: false, fileName: fileName, size: 0, md5: "")
        }
        let template = try readTemplate(request.templatePath)

        let parent = URL(fileURLWithPath: request.outputPath).deletingLastPathComponent().path
        let staging = try makeTemporaryFolder(in: parent, near: request.outputPath)
        var committed = false
        defer { if !committed { try? FileManager.default.removeItem(atPath: staging) } }

        let (size, md5) = try copy(archive, to: staging + "/" + fileName)
        let values = [
            "VENDOR_ID": request.vendorID, "PRODUCT_ID": productID, "CONTENT_VERSION": info.contentVersion ?? "",
            "FILE_NAME": fileName, "FILE_SIZE": String(size), "MD5": md5,
        ]
        let metadata = try render(template, values: values, templatePath: request.templatePath)
        try writeFile(staging + "/metadata.xml", Array(metadata.utf8))

        if outputExists {
            // Move the old output aside first, so a failure leaves either the old or the new folder in place.
            let aside = staging + ".old"
            try FileSystem.rename(request.outputPath, to: aside)
            do {
                try FileSystem.rename(staging, to: request.outputPath)
            } catch {
                try? FileSystem.rename(aside, to: request.outputPath)
                throw error
            }
            committed = true
            try? FileManager.default.removeItem(atPath: aside)
        } else {
            try FileSystem.rename(staging, to: request.outputPath)
            committed = true
        }
        return TransporterResult(report: report, written: true, fileName: fileName, size: size, md5: md5)
    }

    /// Fills `{{NAME}}` placeholders with XML-escaped values.
    /// - Throws: `HCPackError` `.io` naming the template when a placeholder is unknown or left unclosed.
    public static func render(_ template: String, values: [String: String], templatePath: String) throws(HCPackError) -> String {
        var text = template
        for (name, value) in values {
            text = text.replacingOccurrences(of: "{{\(name)}}", with: xmlEscape(value))
        }
        if let start = text.range(of: "{{") {
            let rest = text[start.lowerBound...].prefix(40)
            let name = rest.prefix(while: { $0 != "}" && $0 != "\n" })
            let closed = rest.dropFirst(name.count).hasPrefix("}}")
            throw HCPackError(
                .io,
                "\(templatePath): " + (closed ? "unknown placeholder '\(name)}}'" : "placeholder '\(name)' is never closed with '}}'")
                    + "; the template may use \(placeholders.map { "{{\($0)}}" }.joined(separator: ", "))",
                path: templatePath)
        }
        return text
    }

    /// The characters XML needs escaped in text and attribute values.
    public static func xmlEscape(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&apos;"
            default: result.append(character)
            }
        }
        return result
    }

    static func isValidVendorID(_ text: String) -> Bool {
        // The same syntax as IAPProductIdentifier: 1 to 100 letters, digits, '.', '-' or '_'.
        ContentInfo.isValidProductIdentifier(text)
    }

    private static func readTemplate(_ path: String) throws(HCPackError) -> String {
        let bytes = try FileSystem.readFile(path, limit: 1 << 20)
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw HCPackError(.io, "\(path): the template is not UTF-8; reinstall hcpack's templates", path: path)
        }
        return text
    }

    private static func makeTemporaryFolder(in parent: String, near output: String) throws(HCPackError) -> String {
        let name = URL(fileURLWithPath: output).lastPathComponent
        return try FileSystem.makeTemporaryDirectory(template: parent + "/." + name + ".tmp-XXXXXX", for: parent)
    }

    /// Copies a file, returning its size and MD5 computed from the bytes written.
    private static func copy(_ source: String, to destination: String) throws(HCPackError) -> (Int64, String) {
        let input = try OpenFile(reading: source)
        let output = try FileSystem.createFile(destination)
        let hasher = Digest.Hasher(.md5)
        var total: Int64 = 0
        try input.readChunks { (chunk: UnsafeRawBufferPointer) throws(HCPackError) in
            hasher.update(chunk)
            total += Int64(chunk.count)
            try output.write(chunk)
        }
        try output.finish(mode: nil)
        return (total, hasher.finalize().hexString)
    }

    private static func writeFile(_ path: String, _ bytes: [UInt8]) throws(HCPackError) {
        let file = try FileSystem.createFile(path)
        try file.write(bytes)
        try file.finish(mode: nil)
    }
}
