import Digest
import FileSystemIO
import HCPackCLI

#if canImport(Glibc)
import Glibc
#endif

// libarchive's zip writer stamps DOS times through localtime(): pin UTC so archives do not depend on the host.
setenv("TZ", "UTC0", 1)
tzset()
// Archives, and the DEST files patches apply to, are read through a memory mapping: one truncated by another
// process while it is read raises SIGBUS. Say so (with --json, as the error object too) and exit like any
// other I/O failure (3) instead of dumping core.
HCPack.installTruncationStop(json: CommandLine.arguments.dropFirst().contains("--json"))
// One malloc arena for every thread: glibc gives each thread that allocates an arena of its own, and the
// few worker threads of a build or install each held freed memory there (a 2 GiB build: 69 MiB peak against
// 61 MiB; speed the same within 2%, bench/README.md). Set before any thread starts.
MemoryArenas.useOne()
// A read stuck inside libarchive ends the process with exit 1 and the archive.stalled rule (docs/SECURITY.md).
HCPack.installStallStop()
// fetch is the one command that may make TLS connections; the others start libcrypto lighter.
if CommandLine.arguments.dropFirst().first != "fetch" { LibCrypto.startWithoutTLS() }
exit(HCPack.main(Array(CommandLine.arguments.dropFirst()), context: .process()))
