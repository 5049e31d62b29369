// swift-tools-version:6.0
import PackageDescription

// The commit `hcpack --version` names: $HCPACK_COMMIT, which the Makefile sets from git ("-dirty" appended for
// uncommitted changes), else "unknown" (a plain `swift build`, or a source tree without .git). Not read from
// Context.gitInformation: SwiftPM reuses its last build plan when only the commit changed, so the binary would
// name an old commit. Only letters, digits and '-' pass, so the value is always a plain C string literal.
let buildCommit: String = {
    let commit = Context.environment["HCPACK_COMMIT"] ?? ""
    let plain = !commit.isEmpty && commit.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
    return plain ? commit : "unknown"
}()

let package = Package(
    name: "hcpack",
    products: [
        .library(name: "HostedContent", targets: ["HostedContent"]),
        .executable(name: "hcpack", targets: ["hcpack"]),
    ],
    targets: [
        // C libraries from Debian, through pkg-config.
        .systemLibrary(name: "CArchive", pkgConfig: "libarchive", providers: [.apt(["libarchive-dev"])]),
        .systemLibrary(name: "CLibXML2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // libcurl's header only (libcurl4-openssl-dev, in the compiler's default include path): no pkgConfig, whose
        // `--libs` would link libcurl. HTTPTransport loads libcurl.so.4 with dlopen when fetch first needs it.
        .systemLibrary(name: "CCurl"),
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),

        // The platform layer: every system call the domain needs, and the Linux/macOS differences.
        .target(name: "FileSystemIO"),

        // One Swift wrapper per C library.
        .target(name: "ArchiveIO", dependencies: ["CArchive", "FileSystemIO"]),
        .target(name: "PropertyList", dependencies: ["CLibXML2"]),
        .target(name: "Digest", dependencies: ["CCrypto"]),
        .target(name: "HTTPTransport", dependencies: ["CCurl"]),
        .target(name: "PatchCodec", dependencies: ["CZstd", "FileSystemIO"]),

        // The domain: package model, rules, build/verify/install. No argv, no stdout.
        .target(name: "HostedContent", dependencies: ["FileSystemIO", "ArchiveIO", "PropertyList", "Digest", "HTTPTransport", "PatchCodec"]),

        // The commit hcpack is built from (buildCommit above), for `hcpack --version`.
        .target(name: "CBuildInfo", cSettings: [.define("HCPACK_COMMIT", to: "\"\(buildCommit)\"")]),

        // Command line: parsing, rendering, exit codes.
        .target(name: "HCPackCLI", dependencies: ["HostedContent", "PropertyList", "CBuildInfo"]),
        .executableTarget(name: "hcpack", dependencies: ["HCPackCLI", "FileSystemIO", "Digest"]),

        // An example of the library used from outside: only HostedContent's public API (docs/library.md).
        .executableTarget(name: "hcpack-library-example", dependencies: ["HostedContent"], path: "examples/LibraryUsage"),

        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "ArchiveIOTests", dependencies: ["ArchiveIO"]),
        .testTarget(name: "PropertyListTests", dependencies: ["PropertyList"]),
        .testTarget(name: "DigestTests", dependencies: ["Digest"]),
        .testTarget(name: "PatchCodecTests", dependencies: ["PatchCodec", "FileSystemIO"]),
        .testTarget(name: "HostedContentTests", dependencies: ["HostedContent", "ArchiveIO", "PropertyList", "Digest", "TestSupport"]),
        .testTarget(name: "HCPackCLITests", dependencies: ["HCPackCLI", "HostedContent", "ArchiveIO", "HTTPTransport", "TestSupport", "hcpack", "hcpack-library-example"]),
    ],
    swiftLanguageModes: [.v6]
)
