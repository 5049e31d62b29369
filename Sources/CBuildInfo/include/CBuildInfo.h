#ifndef CBUILDINFO_H
#define CBUILDINFO_H

/// The commit hcpack was built from: 40 hex digits (with "-dirty" when the checkout had uncommitted
/// changes), or "unknown". Package.swift passes it as HCPACK_COMMIT when it compiles BuildInfo.c.
const char *cbuildinfo_commit(void);

#endif
