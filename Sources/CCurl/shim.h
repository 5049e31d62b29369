#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <curl/curl.h>

// libcurl is opened with dlopen and its functions found with dlsym (HTTPTransport's CurlLibrary), never
// linked: calling a curl_* function below directly would fail to link, which is the guard. The pointer types
// come from the header's own declarations, so curl.h stays the source of truth for every signature.

typedef __typeof__(&curl_global_init) ccurl_global_init_fn;
typedef __typeof__(&curl_easy_init) ccurl_easy_init_fn;
typedef __typeof__(&curl_easy_cleanup) ccurl_easy_cleanup_fn;
typedef __typeof__(&curl_easy_reset) ccurl_easy_reset_fn;
typedef __typeof__(&curl_easy_perform) ccurl_easy_perform_fn;
typedef __typeof__(&curl_easy_strerror) ccurl_easy_strerror_fn;
typedef __typeof__(&curl_slist_append) ccurl_slist_append_fn;
typedef __typeof__(&curl_slist_free_all) ccurl_slist_free_all_fn;

// curl_easy_setopt and curl_easy_getinfo are variadic: Swift can neither call them nor hold a variadic function
// pointer's type. Swift keeps dlsym's address as a plain pointer and these wrappers call it through the
// header's own (variadic) type, as a C caller of the linked function would: ABI-correct on every platform.
// One wrapper per argument type; the option's type must match (libcurl reads the argument as that type).

typedef __typeof__(&curl_easy_setopt) ccurl_easy_setopt_fn;
typedef __typeof__(&curl_easy_getinfo) ccurl_easy_getinfo_fn;

static inline CURLcode ccurl_setopt_long(void *setopt, CURL *handle, CURLoption option, long value) {
    return ((ccurl_easy_setopt_fn)setopt)(handle, option, value);
}

static inline CURLcode ccurl_setopt_string(void *setopt, CURL *handle, CURLoption option, const char *value) {
    return ((ccurl_easy_setopt_fn)setopt)(handle, option, value);
}

static inline CURLcode ccurl_setopt_pointer(void *setopt, CURL *handle, CURLoption option, void *value) {
    return ((ccurl_easy_setopt_fn)setopt)(handle, option, value);
}

static inline CURLcode ccurl_setopt_list(void *setopt, CURL *handle, CURLoption option, struct curl_slist *value) {
    return ((ccurl_easy_setopt_fn)setopt)(handle, option, value);
}

static inline CURLcode ccurl_setopt_write_function(void *setopt, CURL *handle, curl_write_callback callback) {
    return ((ccurl_easy_setopt_fn)setopt)(handle, CURLOPT_WRITEFUNCTION, callback);
}

static inline CURLcode ccurl_setopt_header_function(void *setopt, CURL *handle, curl_write_callback callback) {
    return ((ccurl_easy_setopt_fn)setopt)(handle, CURLOPT_HEADERFUNCTION, callback);
}

static inline CURLcode ccurl_setopt_xferinfo_function(void *setopt, CURL *handle, curl_xferinfo_callback callback) {
    return ((ccurl_easy_setopt_fn)setopt)(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

static inline CURLcode ccurl_getinfo_string(void *getinfo, CURL *handle, CURLINFO info, char **value) {
    return ((ccurl_easy_getinfo_fn)getinfo)(handle, info, value);
}

// CURL_ERROR_SIZE is a macro Swift imports, but keep the buffer size in one place.
static inline size_t ccurl_error_size(void) { return CURL_ERROR_SIZE; }

#endif
