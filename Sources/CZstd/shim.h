#ifndef CZSTD_SHIM_H
#define CZSTD_SHIM_H
/* ZSTD_c_stableInBuffer, ZSTD_d_stableOutBuffer and ZSTD_getFrameHeader are in zstd's "static linking only"
   section, stable since libzstd 1.4.9 (Debian 12 has 1.5.4). Their names are macros over enum constants,
   which Swift does not import: hence these shims. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

static inline ZSTD_cParameter czstd_c_stable_in_buffer(void) { return ZSTD_c_stableInBuffer; }
static inline ZSTD_dParameter czstd_d_stable_out_buffer(void) { return ZSTD_d_stableOutBuffer; }
static inline int czstd_windowlog_max(void) { return ZSTD_WINDOWLOG_MAX; }
static inline int czstd_windowlog_min(void) { return ZSTD_WINDOWLOG_MIN; }
static inline int czstd_hashlog_min(void) { return ZSTD_HASHLOG_MIN; }
static inline unsigned long long czstd_content_size_unknown(void) { return ZSTD_CONTENTSIZE_UNKNOWN; }
#endif
