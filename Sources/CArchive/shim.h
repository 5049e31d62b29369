#ifndef CARCHIVE_SHIM_H
#define CARCHIVE_SHIM_H
#include <archive.h>
#include <archive_entry.h>

/* archive_set_error is variadic: Swift cannot call it. */
static inline void carchive_set_error(struct archive *a, int code, const char *message) {
    archive_set_error(a, code, "%s", message);
}
#endif
