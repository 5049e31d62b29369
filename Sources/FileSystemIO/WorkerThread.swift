#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Starting a thread of hcpack's own (hashing, writing, syncing, downloading): `pthread_create`, detached.
///
/// Foundation's `Thread.start()` gives no sign when the thread cannot be made (out of memory for its stack, a
/// thread limit reached): its body never runs, and whoever waits for it waits forever, holding DEST's lock. A
/// failure here is retried for about a second (threads about to end free their slots), then ends the process
/// with exit 3 and a message: every command leaves what a kill at that point leaves, which a rerun completes
/// or removes.
public enum WorkerThread {
    /// Runs `body` on a new thread named `name` (at most 15 bytes are kept).
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var result: Int32 = 0
        for attempt in 0..<50 {
            if attempt > 0 { usleep(20_000) }
            #if canImport(Glibc)
                var thread = pthread_t()
            #else
                var thread: pthread_t?
            #endif
            result = pthread_create(&thread, &attributes, workerThreadMain, start)
            if result == 0 { return }
        }
        Unmanaged<Start>.fromOpaque(start).release()
        let reason = String(cString: strerror(result))
        let message = "hcpack: error: could not start a thread (\(name): \(reason)); the system is short of memory or threads. Run the command again when it has more: an install or fetch it stopped continues from where it was.\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        _exit(3)
    }

    /// What the new thread runs, handed to it through `pthread_create`'s one pointer.
    fileprivate final class Start {
        let name: String
        let body: @Sendable () -> Void

        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
}

#if canImport(Glibc)
    /// `pthread_setname_np`, which Swift's Glibc module leaves out (a GNU extension).
    private typealias SetThreadName = @convention(c) (pthread_t, UnsafePointer<CChar>) -> Int32
    private let setThreadName = gnuFunction("pthread_setname_np", as: SetThreadName.self)

    private func workerThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
        guard let context else { return nil }
        let start = Unmanaged<WorkerThread.Start>.fromOpaque(context).takeRetainedValue()
        // Named for ps, top and perf; Linux keeps 15 bytes.
        _ = setThreadName?(pthread_self(), String(start.name.utf8.prefix(15)) ?? "hcpack")
        start.body()
        return nil
    }
#else
    private func workerThreadMain(_ context: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        Unmanaged<WorkerThread.Start>.fromOpaque(context).takeRetainedValue().body()
        return nil
    }
#endif
