import Foundation
import HCPackCLI

/// Runs hcpack in-process and captures its output.
func hcpack(_ arguments: [String], in directory: String = FileManager.default.currentDirectoryPath, environment: [String: String] = [:])
    -> (status: Int32, stdout: String, stderr: String)
{
    let out = BufferSink(), err = BufferSink()
    let context = Context(standardOutput: out, standardError: err, environment: environment, currentDirectory: directory)
    let status = HCPack.main(arguments, context: context)
    return (status, out.text, err.text)
}

/// The built `hcpack` binary, next to the test bundle.
func hcpackBinary() -> String {
    var url = Bundle.main.bundleURL
    while url.path != "/" {
        let candidate = url.appendingPathComponent("hcpack").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        url.deleteLastPathComponent()
    }
    return "hcpack"
}

/// Parses JSON output into a dictionary.
func jsonObject(_ text: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
}
