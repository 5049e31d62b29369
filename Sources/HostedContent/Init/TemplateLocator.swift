/// Finds files in hcpack's `Templates/` folder other than the `init` template (such as the Transporter
/// metadata.xml), in the same folders and order as `PackageTemplate.locate`: `$HCPACK_TEMPLATES`, the installed
/// layout `<executable's folder>/../share/hcpack/Templates`, then `Templates/` in the source tree.
public enum TemplateLocator {
    /// The folders to try, in order.
    public static func candidateFolders(environment: [String: String], executablePath: String?) -> [String] {
        var folders: [String] = []
        if let named = environment[PackageTemplate.environmentVariable], !named.isEmpty { folders.append(named) }
        if let executablePath { folders.append(PackageTemplate.installedFolder(executablePath: executablePath)) }
        folders.append(PackageTemplate.sourceTreeFolder)
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
            "template \(name) not found (looked in \(folders.joined(separator: ", "))); set \(PackageTemplate.environmentVariable) to hcpack's Templates folder or reinstall hcpack",
            path: folders.first)
    }
}
