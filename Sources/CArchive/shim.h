#ifndef CARCHIVE_SHIM_H
#define CARCHIVE_SHIM_H
#include <archive.h>
#include <archive_entry.h>
#include <locale.h>

/* archive_set_error is variadic: Swift cannot call it. */
static inline void carchive_set_error(struct archive *a, int code, const char *message) {
    archive_set_error(a, code, "%s", message);
}

/*
 * libarchive converts entry names through the calling thread's LC_CTYPE. A Swift process stays in the
 * "C" locale, where non-ASCII names give ARCHIVE_WARN (tar, zip), vanish (xar) or crash the pax writer.
 * ArchiveIO pins a UTF-8 LC_CTYPE on the calling thread (uselocale) around libarchive calls.
 * LC_CTYPE_MASK is a macro Swift does not import, hence this shim. Returns NULL when no UTF-8 locale exists.
 */
static inline locale_t carchive_new_utf8_ctype_locale(void) {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (l == (locale_t)0) {
        l = newlocale(LC_CTYPE_MASK, "en_US.UTF-8", (locale_t)0);
    }
    return l;
}
#endif
