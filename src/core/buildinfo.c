/*
 * buildinfo.c - see buildinfo.h.
 */
#include "core/buildinfo.h"
#include "version.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <link.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

/* The file name of the libhiredis this process loaded (hiredis has no
 * run-time version call; Debian names the file by its ABI: 0.14, 1.1.0). */
static int find_hiredis(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    const char *base = slash ? slash + 1 : info->dlpi_name;
    if (!base || strncmp(base, "libhiredis.so", 13) != 0) return 0;
    *(const char **)data = base;
    return 1;
}

/* "  NAME BUILT", and " (RUNNING at run time)" when that differs. */
static void library(FILE *f, const char *name, const char *built, const char *running)
{
    fprintf(f, "  %s %s", name, built);
    if (running && strcmp(running, built)) fprintf(f, " (%s at run time)", running);
    fputc('\n', f);
}

void buildinfo_print(FILE *f)
{
    fprintf(f, "qpool %s\n", QPOOL_VERSION);
    const char *loaded = NULL;
    dl_iterate_phdr(find_hiredis, &loaded);
    fprintf(f, "  hiredis %d.%d.%d", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
    if (loaded) fprintf(f, " (%s loaded)", loaded);
    fputc('\n', f);
#ifdef OPENSSL_VERSION_STR /* OpenSSL 3 */
    library(f, "TLS: OpenSSL", OPENSSL_VERSION_STR, OpenSSL_version(OPENSSL_VERSION_STRING));
#else
    library(f, "TLS:", OPENSSL_VERSION_TEXT, OpenSSL_version(OPENSSL_VERSION));
#endif
    char mhd[32];
    snprintf(mhd, sizeof mhd, "%x.%x.%x", (unsigned)(MHD_VERSION >> 24) & 0xffu,
             (unsigned)(MHD_VERSION >> 16) & 0xffu, (unsigned)(MHD_VERSION >> 8) & 0xffu);
    library(f, "libmicrohttpd", mhd, MHD_get_version());
    /* libconfig.h's own numbers lag its releases (1.7.3 says 1.7.0): the
     * version pkg-config gave the build */
    library(f, "libconfig", QPOOL_LIBCONFIG_VERSION, NULL);
    library(f, "cJSON",
            STR(CJSON_VERSION_MAJOR) "." STR(CJSON_VERSION_MINOR) "." STR(CJSON_VERSION_PATCH),
            cJSON_Version());
}
