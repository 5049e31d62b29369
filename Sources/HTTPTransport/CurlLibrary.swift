internal import CCurl
import Foundation

/// The libcurl functions `HTTPClient` calls, found with `dlsym` in libcurl.so.4 opened with `dlopen` when the
/// first client is made: hcpack does not link libcurl (it is not in the binary's `DT_NEEDED`), so only
/// `fetch` pays for loading it and the 25 libraries it brings (gnutls, krb5, ldap, ssh2, ...).
///
/// Immutable once built, and the library is never closed, so the pointers stay valid for the process: that is
/// what makes the `@unchecked Sendable` true. The types are curl.h's own (`ccurl_*_fn` in CCurl's shim.h).
struct CurlLibrary: @unchecked Sendable {
    /// The shared object opened: libcurl's ABI 4, the one curl.h (libcurl4-openssl-dev) describes.
    static let defaultName = "libcurl.so.4"
    /// The Debian package holding `defaultName`, named in the error when it cannot be loaded (the .deb's
    /// Depends lists it: .ci/package).
    static let debianPackage = "libcurl4"

    let globalInit: ccurl_global_init_fn
    let easyInit: ccurl_easy_init_fn
    let easyCleanup: ccurl_easy_cleanup_fn
    let easyReset: ccurl_easy_reset_fn
    let easyPerform: ccurl_easy_perform_fn
    let easyStrerror: ccurl_easy_strerror_fn
    let slistAppend: ccurl_slist_append_fn
    let slistFreeAll: ccurl_slist_free_all_fn
    /// `curl_easy_setopt` and `curl_easy_getinfo` are variadic: called only through shim.h's `ccurl_setopt_*`
    /// and `ccurl_getinfo_*`, which cast them back to their variadic type.
    let easySetopt: UnsafeMutableRawPointer
    let easyGetinfo: UnsafeMutableRawPointer

    /// libcurl.so.4, loaded and `curl_global_init`ed once per process at first use (Swift's lazy statics are
    /// thread-safe; `curl_global_init` itself is not in every libcurl), or why it could not be.
    static let shared: Result<CurlLibrary, HTTPError> = load(defaultName)

    /// `shared` for `defaultName`; another name (tests: one that does not exist) is loaded anew, not cached.
    static func named(_ name: String) -> Result<CurlLibrary, HTTPError> {
        name == defaultName ? shared : load(name)
    }

    /// `dlopen`s `name`, resolves every function with `dlsym`, then calls `curl_global_init`.
    private static func load(_ name: String) -> Result<CurlLibrary, HTTPError> {
        let install = "install the Debian package \(debianPackage) (apt-get install \(debianPackage))"
        // RTLD_LOCAL: libcurl's symbols serve only these pointers, not later lookups by other libraries.
        guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else {
            return .failure(
                failure("fetching over HTTP needs libcurl (\(name)), which could not be loaded: \(lastError()); \(install)"))
        }
        let library: CurlLibrary
        do {
            library = try CurlLibrary(resolvingIn: handle)
        } catch {
            let what = "\(error.symbol) (\(error.reason))"
            return .failure(failure("fetching over HTTP needs libcurl, but \(name) has no \(what); \(install)"))
        }
        guard library.globalInit(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK else {
            return .failure(failure("libcurl could not be initialized (curl_global_init in \(name) failed)"))
        }
        return .success(library)
    }

    /// A function `dlsym` did not find, with `dlerror`'s reason.
    private struct MissingSymbol: Error {
        var symbol: String
        var reason: String
    }

    /// Every function, found with `dlsym` in the library `handle` (from `dlopen`).
    /// - Throws: `MissingSymbol` for the first one missing.
    private init(resolvingIn handle: UnsafeMutableRawPointer) throws(MissingSymbol) {
        func address(_ symbol: String) throws(MissingSymbol) -> UnsafeMutableRawPointer {
            guard let address = dlsym(handle, symbol) else { throw MissingSymbol(symbol: symbol, reason: Self.lastError()) }
            return address
        }
        func function<Function>(_ symbol: String) throws(MissingSymbol) -> Function {
            unsafeBitCast(try address(symbol), to: Function.self)
        }
        globalInit = try function("curl_global_init")
        easyInit = try function("curl_easy_init")
        easyCleanup = try function("curl_easy_cleanup")
        easyReset = try function("curl_easy_reset")
        easyPerform = try function("curl_easy_perform")
        easyStrerror = try function("curl_easy_strerror")
        slistAppend = try function("curl_slist_append")
        slistFreeAll = try function("curl_slist_free_all")
        easySetopt = try address("curl_easy_setopt")
        easyGetinfo = try address("curl_easy_getinfo")
    }

    /// `dlerror`'s message for the last failed `dlopen` or `dlsym` of this thread.
    private static func lastError() -> String {
        dlerror().map { String(cString: $0) } ?? "no reason given"
    }

    private static func failure(_ message: String) -> HTTPError {
        HTTPError(kind: .other, url: "", message: message, code: -1)
    }
}
