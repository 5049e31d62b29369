import Foundation
import HCPackCLI
import Testing

/// Runs hcpack in-process and captures its output.
func hcpack(_ arguments: [String], in directory: String = FileManager.default.currentDirectoryPath, environment: [String: String] = [:])
    -> (status: Int32, stdout: String, stderr: String)
{
    let out = BufferSink(), err = BufferSink()
    let context = Context(standardOutput: out, standardError: err, environment: environment, currentDirectory: directory)
    let status = HCPack.main(arguments, context: context)
    return (status, out.text, err.text)
}

/// The `hcpack` binary `swift build` made beside the test bundle; never one found on PATH, which would test
/// an installed hcpack instead of this build. Missing, it is a recorded failure and a path that does not run.
func hcpackBinary() -> String {
    let candidate = Bundle.main.bundleURL.appendingPathComponent("hcpack").path
    if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    Issue.record("no hcpack binary beside the test bundle at \(candidate): run swift build --build-tests")
    return candidate
}

/// Parses JSON output into a dictionary.
func jsonObject(_ text: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
}
