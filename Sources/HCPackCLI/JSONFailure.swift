import HostedContent
import Synchronization

/// The JSON object a command prints under `--json` when it fails with an error rather than a report
/// (docs/json.md, docs/schemas/common.schema.json): `{"error": {"code", "exitCode", "message", "path"}}`.
enum JSONFailure {
    private static let on = Atomic<Bool>(false)

    /// True while a `--json` command runs in this process: the stalled-read stop then prints the object too.
    static var isOn: Bool {
        get { on.load(ordering: .relaxed) }
        set { on.store(newValue, ordering: .relaxed) }
    }

    static func object(_ error: HCPackError) -> JSONValue {
        .object([
            (
                "error",
                .object([
                    ("code", .string(error.code.rawValue)),
                    ("exitCode", .number(Int64(HCPack.exitCode(for: error)))),
                    ("message", .string(error.message)),
                    ("path", error.path.map(JSONValue.string) ?? .null),
                ])
            )
        ])
    }
}

/// Passes text on and remembers whether any was written (so a failure adds no second JSON object).
final class WrittenSink: TextSink {
    private let sink: TextSink
    private(set) var wrote = false
    init(_ sink: TextSink) { self.sink = sink }
    func write(_ text: String) {
        if !text.isEmpty { wrote = true }
        sink.write(text)
    }
}
