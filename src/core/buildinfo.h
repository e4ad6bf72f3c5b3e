/*
 * buildinfo.h - what `qpool --version` prints: qpool's version, then the
 * libraries it was built with (and, where it can tell, the one it runs with
 * when that differs).
 */
#ifndef QPOOL_BUILDINFO_H
#define QPOOL_BUILDINFO_H

#include <stdio.h>

/* "qpool 1.0.0" on the first line, then one indented line per library:
 * hiredis (and the libhiredis loaded), TLS (OpenSSL), libmicrohttpd,
 * libconfig, cJSON. */
void buildinfo_print(FILE *f);

#endif
