// The few places where Linux and macOS differ, in one file. Only Linux is built and tested here (see
// docs/SECURITY.md, "Platforms"); the Darwin branches follow Apple's documentation.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The C library's own `open`, `read`, `close` and `rename`, for types whose methods share those names.
enum CLibrary {
    #if canImport(Glibc)
        static func open(_ path: String, _ flags: Int32) -> Int32 { Glibc.open(path, flags) }
        static func read(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
            Glibc.read(descriptor, buffer, count)
        }
        static func close(_ descriptor: Int32) -> Int32 { Glibc.close(descriptor) }
        static func rename(_ source: String, _ target: String) -> Int32 { Glibc.rename(source, target) }
    #elseif canImport(Darwin)
        static func open(_ path: String, _ flags: Int32) -> Int32 { Darwin.open(path, flags) }
        static func read(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
            Darwin.read(descriptor, buffer, count)
        }
        static func close(_ descriptor: Int32) -> Int32 { Darwin.close(descriptor) }
        static func rename(_ source: String, _ target: String) -> Int32 { Darwin.rename(source, target) }
    #endif
}

/// A C library function that Glibc's Swift module does not export (GNU extensions such as `syncfs`,
/// `sync_file_range`, `renameat2`), looked up with `dlsym`; nil where the C library lacks it, and always nil
/// off Linux, where callers take their documented fallback.
func gnuFunction<Function>(_ name: String, as type: Function.Type) -> Function? {
    #if os(Linux)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(symbol, to: Function.self)
    #else
        return nil
    #endif
}

#if os(Linux)
    private typealias Renameat2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    private let renameat2 = gnuFunction("renameat2", as: Renameat2.self)
#endif

/// Renames without replacing anything at the target: `renameat2(RENAME_NOREPLACE)` on Linux (looked up, since
/// Glibc's module does not export it), `renameatx_np(RENAME_EXCL)` on macOS.
/// - Returns: 0 on success, -1 with `errno` set; `ENOSYS` when the system has no such call.
func renameWithoutReplacing(_ from: Int32, _ name: String, _ to: Int32, _ targetName: String) -> Int32 {
    #if os(Linux)
        guard let renameat2 else {
            errno = ENOSYS
            return -1
        }
        return renameat2(from, name, to, targetName, 1 /* RENAME_NOREPLACE */)
    #elseif canImport(Darwin)
        return renameatx_np(from, name, to, targetName, UInt32(RENAME_EXCL))
    #else
        errno = ENOSYS
        return -1
    #endif
}

/// Process-wide memory settings.
public enum MemoryArenas {
    /// Makes every thread allocate from one malloc arena (glibc's `mallopt(M_ARENA_MAX, 1)`; nothing elsewhere).
    /// glibc gives each thread that allocates an arena of its own, which keeps the memory freed there; for a
    /// few long-lived worker threads that is resident memory, not speed. Call before any thread starts.
    public static func useOne() {
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        let arenaMaximum: Int32 = -8  // M_ARENA_MAX in <malloc.h>, which Swift's Glibc module leaves out
        _ = gnuFunction("mallopt", as: Mallopt.self)?(arenaMaximum, 1)
    }
}
