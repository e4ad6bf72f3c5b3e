/*
 * horizon.h - `qpool import horizon APP [--env ENV]`: a qpool.conf that runs
 * the work an app's config/horizon.php describes.
 *
 * The adapter prints the app's resolved `horizon` config as JSON
 * (`php qpool-handler.php --describe-horizon APP`); horizon_import turns it
 * into qpool.conf text. It merges `defaults` with the chosen environment as
 * Horizon does (PHP's array_replace_recursive; an environment is found by
 * name, else by a wildcard pattern such as "*"), maps each supervisor to a
 * pool and `waits` to alerts.long_wait, and writes a comment wherever
 * qpool's semantics differ or an option has no equivalent. The pools name
 * the app with `laravel = ...`, so its Redis and cache settings are read
 * from the app when qpool starts.
 */
#ifndef QPOOL_HORIZON_H
#define QPOOL_HORIZON_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "core/util.h"

/* Pure: desc is the describer's JSON ({"horizon": {...}, "environment": ...});
 * env NULL: the app's own environment. Appends the config to out. Returns
 * 0, or -1 with the reason in err. */
int horizon_import(const cJSON *desc, const char *app, const char *env, sbuf_t *out, char *err, size_t errn);

/* Pure: PHP's array_replace_recursive(base, repl) on JSON values (objects by
 * key, lists by index); returns a new value. */
cJSON *horizon_replace_recursive(const cJSON *base, const cJSON *repl);

#endif
