import Foundation
import HostedContent

/// A one-line progress bar on stderr, drawn only on a terminal, only after the work has taken a moment,
/// and at most ten times a second.
final class ProgressBar {
    private let sink: TextSink
    private let enabled: Bool
    private let start = Date()
    private var lastDraw = Date.distantPast
    private var drawn = false

    /// - Parameter enabled: false for `--json`, `--quiet`, or when stderr is not a terminal.
    init(context: Context, enabled: Bool) {
        self.sink = context.standardError
        self.enabled = enabled && context.standardErrorIsTerminal
    }

    /// A handler for the domain's progress callbacks, or nil when nothing is drawn.
    var handler: ProgressHandler? {
        guard enabled else { return nil }
        return { [self] update in self.update(update) }
    }

    func update(_ update: ProgressUpdate) {
        let now = Date()
        guard now.timeIntervalSince(start) > 0.5, now.timeIntervalSince(lastDraw) > 0.1 else { return }
        lastDraw = now
        drawn = true
        var line = "\r\u{1B}[2K\(update.phase) "
        if let total = update.totalBytes, total > 0 {
            let fraction = min(1, Double(update.completedBytes) / Double(total))
            let width = 30
            let filled = Int(fraction * Double(width))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] "
            line += String(format: "%3.0f%% ", fraction * 100)
        }
        line += Self.bytes(update.completedBytes)
        if let total = update.totalBytes { line += " / " + Self.bytes(total) }
        line += ", \(update.completedFiles)"
        if let files = update.totalFiles { line += "/\(files)" }
        line += " files"
        sink.write(line)
    }

    /// Clears the line before the summary is printed.
    func finish() {
        if drawn { sink.write("\r\u{1B}[2K") }
    }

    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }
}
