import HCPackCLI

#if canImport(Glibc)
import Glibc
#endif

// libarchive's zip writer stamps DOS times through localtime(): pin UTC so archives do not depend on the host.
setenv("TZ", "UTC0", 1)
tzset()
exit(HCPack.main(Array(CommandLine.arguments.dropFirst()), context: .process()))
