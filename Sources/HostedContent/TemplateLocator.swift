import Foundation

/// Finds files in hcpack's `Templates/` folder.
///
/// The one place that knows where templates live, tried in order: `$HCPACK_TEMPLATES`, the installed layout
/// `<executable's folder>/../share/hcpack/Templates`, then `Templates/` in the source tree hcpack was built from.
/// (To do: once `PackageTemplate.locate` of `hcpack init` lands, share its folder list instead of repeating it.)
public enum TemplateLocator {
    /// The environment variable naming a templates folder.
    public static let environmentVariable = "HCPACK_TEMPLATES"

    /// `Templates/` in the source tree this file was compiled from.
    public static let sourceTreeFolder =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Templates").path

    /// The folders to try, in order.
    public static func candidateFolders(environment: [String: String], executablePath: String?) -> [String] {
        var folders: [String] = []
        if let named = environment[environmentVariable], !named.isEmpty { folders.append(named) }
        if let executablePath {
            let bin = URL(fileURLWithPath: executablePath).deletingLastPathComponent()
            folders.append(bin.deletingLastPathComponent().appendingPathComponent("share/hcpack/Templates").path)
        }
        folders.append(sourceTreeFolder)
        return folders
    }

    /// The path of template `name` in the first folder that has it.
    /// - Throws: `HCPackError` `.notFound` listing every folder tried.
    public static func locate(_ name: String, environment: [String: String], executablePath: String?) throws(HCPackError)
        -> String
    {
        let folders = candidateFolders(environment: environment, executablePath: executablePath)
        for folder in folders {
            let candidate = folder + "/" + name
            if (try? FileSystem.status(candidate))??.kind == .file { return candidate }
        }
        throw HCPackError(
            .notFound,
            "template \(name) not found (looked in \(folders.joined(separator: ", "))); set \(environmentVariable) to hcpack's Templates folder or reinstall hcpack",
            path: folders.first)
    }

    /// The running executable (`/proc/self/exe`), for the installed-layout lookup.
    public static func currentExecutablePath() -> String? {
        if let resolved = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return resolved }
        return CommandLine.arguments.first.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
    }
}
