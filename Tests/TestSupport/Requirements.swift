import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Something of the machine a test needs and a developer's laptop may lack (root, ptrace, Go).
///
/// A test declares it with `.enabled(if: requirement.enabled, requirement.comment)`, so a run without it
/// reports the test as skipped, by name and with the reason, and starts with `try requirement.require()`.
/// With `HCPACK_TEST_REQUIRE_ALL=1` (set by `.ci/run`) nothing is skipped: a missing requirement fails the
/// test instead, so a green CI run means every test ran.
public struct Requirement: Sendable {
    /// What is needed and how to get it, shown as the skip reason and in the failure.
    public let reason: String
    /// Whether this machine has it.
    public let isMet: Bool

    /// Whether a missing requirement fails the test rather than skipping it (CI).
    public static let requireAll = ProcessInfo.processInfo.environment["HCPACK_TEST_REQUIRE_ALL"] == "1"

    /// The test runs: the requirement is met, or CI requires it (and `require()` then fails the test).
    public var enabled: Bool { isMet || Self.requireAll }

    /// The reason, for `.enabled(if:_:)`.
    public var comment: Comment { Comment(rawValue: reason) }

    /// Fails the test when the requirement is not met (only reached when CI requires it).
    public func require(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try #require(isMet, comment, sourceLocation: sourceLocation)
    }

    /// strace installed and allowed to trace (`make deps` installs it; a container may still forbid ptrace).
    public static let strace = Requirement(
        reason: "needs strace allowed to trace (make deps installs it; the container must allow ptrace)",
        isMet: run("strace", ["-f", "-o", "/dev/null", "true"]).status == 0)

    /// Root that may mount a tmpfs (small, full or read-only file systems; other-file-system destinations).
    public static let mount = Requirement(
        reason: "needs root allowed to mount a tmpfs (run the suite as root, in a container with CAP_SYS_ADMIN)",
        isMet: canMountTmpfs())

    /// Root on a file system that takes the immutable flag (`chattr +i`), which stops even root from writing.
    public static let immutable = Requirement(
        reason: "needs root and chattr +i on the temporary folder's file system (e2fsprogs; ext4, xfs or btrfs)",
        isMet: canSetImmutable())

    /// Root that may run a command as nobody (`setpriv`, util-linux), for per-user limits root is exempt from.
    public static let otherUser = Requirement(
        reason: "needs root, to run a command as nobody with setpriv (util-linux)",
        isMet: getuid() == 0 && run("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "true"]).status == 0)

    /// Go, for Go's archive/zip as a zip reader and golang.org/x/mod/sumdb/note for signing interop.
    public static let go = Requirement(
        reason: "needs Go (make deps installs golang-go and golang-golang-x-mod-dev)",
        isMet: run("go", ["version"]).status == 0)

    /// A pseudo-terminal to run a command on (devpts mounted; a bare chroot has none).
    public static let pty = Requirement(
        reason: "needs a pseudo-terminal (devpts mounted at /dev/pts; a bare chroot or container may lack it)",
        // As the tests open one: Python's pty module (glibc's posix_openpt is not in Swift's Glibc module).
        isMet: run("python3", ["-c", "import os, pty; master, slave = pty.openpty(); os.close(master); os.close(slave)"]).status == 0)

    private static func canMountTmpfs() -> Bool {
        guard getuid() == 0 else { return false }
        let folder = TemporaryFolder()
        guard run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", folder.path]).status == 0 else { return false }
        return run("umount", [folder.path]).status == 0
    }

    private static func canSetImmutable() -> Bool {
        guard getuid() == 0 else { return false }
        let folder = TemporaryFolder()
        guard run("chattr", ["+i", folder.path]).status == 0 else { return false }
        return run("chattr", ["-i", folder.path]).status == 0
    }
}
