// A C target because Swift's -D defines carry no values: Package.swift defines HCPACK_COMMIT for this file only,
// so a new commit recompiles one C file and relinks, and nothing in the source tree is rewritten.
#include "CBuildInfo.h"

#ifndef HCPACK_COMMIT
#define HCPACK_COMMIT "unknown"
#endif

const char *cbuildinfo_commit(void) { return HCPACK_COMMIT; }
