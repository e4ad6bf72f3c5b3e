/*
 * web.h - the dashboard's files (web/ in the source tree), compiled into
 * the binary (cmake/embed.cmake): nothing is read from disk or fetched at
 * run time, so it works on an air-gapped server and cannot be swapped by
 * whoever can write a directory.
 */
#ifndef QPOOL_WEB_H
#define QPOOL_WEB_H

#include <stddef.h>

typedef struct {
    const char *name;                /* file name in web/, e.g. "app.js" */
    const unsigned char *data;
    size_t len;
} web_asset_t;

extern const web_asset_t WEB_ASSETS[]; /* ends with a NULL name */

/* The asset named name, or NULL. */
const web_asset_t *web_asset(const char *name);
/* Its Content-Type, from the extension. */
const char *web_content_type(const char *name);

#endif
