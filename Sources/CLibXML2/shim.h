#ifndef CLIBXML2_SHIM_H
#define CLIBXML2_SHIM_H
/* Debian builds libxml2 with ICU; its ICU types clash with Foundation's. */
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>
#include <libxml/xmlIO.h>

/* xmlFree is a global function pointer: Swift 6 cannot call it. */
static inline void clibxml2_free(void *pointer) { xmlFree(pointer); }
#endif
