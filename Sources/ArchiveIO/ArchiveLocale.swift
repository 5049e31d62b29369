internal import CArchive

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A UTF-8 `LC_CTYPE` locale, created once (`newlocale`) and never freed.
///
/// `nonisolated(unsafe)`: the value is written once by the lazy global initializer and only read afterwards;
/// a `locale_t` may be installed on any number of threads at once.
nonisolated(unsafe) private let utf8CTypeLocale: locale_t? = carchive_new_utf8_ctype_locale()

/// Runs `body` with a UTF-8 `LC_CTYPE` installed on the calling thread (`uselocale`), then restores the
/// thread's previous locale.
///
/// Why: libarchive converts names between the archive's charset and the *current* locale. Swift programs
/// run in the "C" locale, where a UTF-8 name such as `Défense.json` makes tar and zip readers return
/// `ARCHIVE_WARN`, makes the xar reader drop the name, makes the zip writer drop the UTF-8 flag, and
/// crashes the pax writer (libarchive 3.6.2). Pinning the locale per call also keeps written bytes
/// independent of the host's `LANG`. Process-wide `setlocale` is left alone.
func withArchiveLocale<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
    guard let locale = utf8CTypeLocale else { return try body() }
    let previous = uselocale(locale)
    defer {
        if let previous { uselocale(previous) }
    }
    return try body()
}
