// swift-tools-version:6.0
import PackageDescription

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
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),

        // The platform layer: every system call the domain needs, and the Linux/macOS differences.
        .target(name: "FileSystemIO"),

        // One Swift wrapper per C library.
        .target(name: "ArchiveIO", dependencies: ["CArchive", "FileSystemIO"]),
        .target(name: "PropertyList", dependencies: ["CLibXML2"]),
        .target(name: "Digest", dependencies: ["CCrypto"]),
        .target(name: "PatchCodec", dependencies: ["CZstd", "FileSystemIO"]),

        // The domain: package model, rules, build/verify/install. No argv, no stdout.
        .target(name: "HostedContent", dependencies: ["FileSystemIO", "ArchiveIO", "PropertyList", "Digest", "PatchCodec"]),

        // Command line: parsing, rendering, exit codes.
        .target(name: "HCPackCLI", dependencies: ["HostedContent", "PropertyList"]),
        .executableTarget(name: "hcpack", dependencies: ["HCPackCLI", "FileSystemIO"]),

        // An example of the library used from outside: only HostedContent's public API (docs/library.md).
        .executableTarget(name: "hcpack-library-example", dependencies: ["HostedContent"], path: "examples/LibraryUsage"),

        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "ArchiveIOTests", dependencies: ["ArchiveIO"]),
        .testTarget(name: "PropertyListTests", dependencies: ["PropertyList"]),
        .testTarget(name: "DigestTests", dependencies: ["Digest"]),
        .testTarget(name: "PatchCodecTests", dependencies: ["PatchCodec", "FileSystemIO"]),
        .testTarget(name: "HostedContentTests", dependencies: ["HostedContent", "ArchiveIO", "PropertyList", "Digest", "TestSupport"]),
        .testTarget(name: "HCPackCLITests", dependencies: ["HCPackCLI", "HostedContent", "ArchiveIO", "TestSupport", "hcpack", "hcpack-library-example"]),
    ],
    swiftLanguageModes: [.v6]
)
