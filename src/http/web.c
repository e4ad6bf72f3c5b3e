/*
 * web.c - looking up the dashboard's compiled-in files (see web.h).
 */
#include "http/web.h"

#include <string.h>

const web_asset_t *web_asset(const char *name)
{
    for (const web_asset_t *a = WEB_ASSETS; a->name; a++)
        if (!strcmp(a->name, name)) return a;
    return NULL;
}

const char *web_content_type(const char *name)
{
    static const struct {
        const char *ext, *type;
    } TYPES[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},   {".svg", "image/svg+xml"},
        {".png", "image/png"},                 {".ico", "image/x-icon"},
    };
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof TYPES / sizeof *TYPES; i++)
        if (!strcmp(dot, TYPES[i].ext)) return TYPES[i].type;
    return "application/octet-stream";
}
