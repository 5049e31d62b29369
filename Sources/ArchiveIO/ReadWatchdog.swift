import Dispatch
import Synchronization
import FileSystemIO

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The last line of defence against a read that never ends: a bug in libarchive (or any C library) can loop
/// inside one call without ever calling back, where no Swift code can interrupt it.
///
/// Every `ArchiveReader` has a monitor, checked by the process's one watchdog thread at the reader's interval.
/// It watches the reader's progress (bytes handed to libarchive, headers and data blocks returned, every
/// return from libarchive) while a libarchive call or a read of the input is under way, and stops the
/// process when that call goes `stallSeconds` without progress, or its resident memory grows by more than
/// `maxStallMemoryGrowth` without progress.
///
/// Stopping means ending the process: a thread stuck in C cannot be cancelled, and one left spinning keeps
/// its CPU and memory. Reading comes before any change to a destination (install stages into its own folder
/// and places files only once the whole archive was read), so the stop leaves what a crash or a kill leaves,
/// which the next install tidies. The stop handler says what happened; without one, the message goes to
/// standard error. Either way the process then exits with status 1.
public enum ArchiveWatchdog {
    /// Sets what runs, on the monitor's thread, when a read stalls: it should tell the user (`error` has
    /// code `.stalled`). The process ends with `_exit(1)` if the handler returns.
    public static func setStopHandler(_ handler: @escaping @Sendable (ArchiveError) -> Void) {
        stopHandler.withLock { $0 = handler }
    }

    /// Sets the default of `ArchiveLimits.stallSeconds` (30) for limits made from now on; the command line
    /// takes it from `HCPACK_STALL_SECONDS`. 0 turns the watchdog off.
    public static func setDefaultStallSeconds(_ seconds: Int) {
        defaultStallSeconds.store(max(seconds, 0), ordering: .relaxed)
    }

    static var stallSecondsDefault: Double { Double(defaultStallSeconds.load(ordering: .relaxed)) }

    /// Runs the handler (or writes the message to standard error), then ends the process.
    static func stop(_ error: ArchiveError) -> Never {
        if let handler = stopHandler.withLock({ $0 }) {
            handler(error)
        } else {
            let text = Array("error: \(error.message)\n".utf8)
            _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        }
        _exit(1)
    }
}

private let stopHandler = Mutex<(@Sendable (ArchiveError) -> Void)?>(nil)
private let defaultStallSeconds = Atomic<Int>(30)

/// What one reader's monitor watches: a counter bumped at every sign of progress, and whether a call that
/// could stall is under way. Bumped from the reading thread, read from the monitor's.
final class ReadProgress: Sendable {
    private let ticks = Atomic<Int>(0)
    private let busy = Atomic<Int>(0)
    /// What the reader is doing ("reading the header after entry 12"), for the message.
    private let activity = Mutex<String>("opening the archive")

    /// Something moved: bytes arrived, a header or a block came back.
    func tick() { ticks.add(1, ordering: .relaxed) }

    /// Runs `body`, a call that may stall, as `activity`.
    func watching<T, E: Error>(_ activity: @autoclosure () -> String, _ body: () throws(E) -> T) throws(E) -> T {
        self.activity.withLock { $0 = activity() }
        busy.add(1, ordering: .sequentiallyConsistent)
        defer {
            ticks.add(1, ordering: .relaxed)
            busy.subtract(1, ordering: .sequentiallyConsistent)
        }
        return try body()
    }

    var snapshot: (ticks: Int, busy: Bool, activity: String) {
        (ticks.load(ordering: .relaxed), busy.load(ordering: .sequentiallyConsistent) > 0, activity.withLock { $0 })
    }
}

/// A reader's registration with the process's one watchdog thread; it ends when the reader goes.
final class ReadWatchdog {
    let progress = ReadProgress()
    private let monitor: StallMonitor

    /// Nil when `limits.stallSeconds` is 0 (no watchdog).
    init?(limits: ArchiveLimits, inputName: String) {
        guard limits.stallSeconds > 0 else { return nil }
        monitor = StallMonitor(
            progress: progress, stallSeconds: limits.stallSeconds, maxGrowth: limits.maxStallMemoryGrowth,
            inputName: inputName)
        WatchdogThread.shared.add(monitor, interval: min(1.0, limits.stallSeconds / 4))
    }

    deinit { WatchdogThread.shared.remove(monitor) }
}

/// One thread for every reader of the process, started at the first: a thread per reader was four thread
/// starts for one delta of two small archives (bench/README.md, "Binary deltas"). It checks every reader at
/// the shortest of their intervals (more often is harmless: a stall is time without a tick) and sleeps
/// while there is none.
private final class WatchdogThread: Sendable {
    static let shared = WatchdogThread()
    private let monitors = Mutex<[ObjectIdentifier: (monitor: StallMonitor, interval: Double)]>([:])
    private let wake = DispatchSemaphore(value: 0)

    private init() {
        // A thread of hcpack's own, not a dispatch timer: libdispatch retries forever a thread it cannot start.
        WorkerThread.start(name: "hcpack-watchdog") { [self] in
            while true {
                let (watched, interval) = monitors.withLock { ($0.values.map(\.monitor), $0.values.map(\.interval).min()) }
                for monitor in watched { monitor.check() }
                _ = wake.wait(timeout: interval.map { .now() + $0 } ?? .distantFuture)
            }
        }
    }

    func add(_ monitor: StallMonitor, interval: Double) {
        monitors.withLock { $0[ObjectIdentifier(monitor)] = (monitor, interval) }
        wake.signal()  // a shorter interval than the current wait takes effect now
    }

    func remove(_ monitor: StallMonitor) {
        monitors.withLock { $0[ObjectIdentifier(monitor)] = nil }
    }
}

/// The check itself, on the watchdog's thread.
private final class StallMonitor: Sendable {
    let progress: ReadProgress
    let stallSeconds: Double
    let maxGrowth: Int64
    let inputName: String
    /// The tick count last seen, when it was seen to change (or the reader was seen idle), and the resident
    /// memory then.
    private let last = Mutex<(ticks: Int, since: ContinuousClock.Instant, resident: Int64?)>(
        (-1, ContinuousClock.now, nil))

    init(progress: ReadProgress, stallSeconds: Double, maxGrowth: Int64, inputName: String) {
        self.progress = progress
        self.stallSeconds = stallSeconds
        self.maxGrowth = maxGrowth
        self.inputName = inputName
    }

    func check() {
        let (ticks, busy, activity) = progress.snapshot
        let now = ContinuousClock.now
        let verdict = last.withLock { last -> String? in
            if !busy || ticks != last.ticks {
                last = (ticks, now, busy && maxGrowth > 0 ? Self.residentBytes() : nil)
                return nil
            }
            let quiet = now - last.since
            if quiet >= .seconds(stallSeconds) {
                return "no progress for \(Int(stallSeconds)) s"
            }
            if let before = last.resident, let resident = Self.residentBytes(), resident - before > maxGrowth {
                return "memory grew by \((resident - before) >> 20) MiB without progress"
            }
            return nil
        }
        guard let verdict else { return }
        ArchiveWatchdog.stop(
            ArchiveError(
                .stalled,
                "\(inputName): the archive reader stopped while \(activity): \(verdict) (limit stallSeconds "
                    + "\(Int(stallSeconds)) s, maxStallMemoryGrowth \(maxGrowth >> 20) MiB); a damaged or hostile "
                    + "archive met a bug in libarchive. Nothing outside hcpack's staging folder was changed; do not "
                    + "trust this archive"))
    }

    /// The process's resident set (`/proc/self/statm`, second field, in pages); nil where it cannot be read.
    private static func residentBytes() -> Int64? {
        let descriptor = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let fields = buffer[0..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int64(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * Int64(getpagesize())
    }
}
