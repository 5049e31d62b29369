import HCPackCLI

#if canImport(Glibc)
import Glibc
#endif

exit(HCPack.main(Array(CommandLine.arguments.dropFirst()), context: .process()))
