#ifndef CCRYPTO_SHIM_H
#define CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

/* OPENSSL_free is a macro. */
static inline void ccrypto_free(void *pointer) { OPENSSL_free(pointer); }
#endif
