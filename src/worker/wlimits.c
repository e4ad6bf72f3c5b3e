/*
 * wlimits.c - see wlimits.h.
 */
#include "worker/wlimits.h"
#include "core/log.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

void wlimits_init(wlimits_t *wl, const qconf_t *conf, const pool_conf_t *p, const char *prefix)
{
    memset(wl, 0, sizeof *wl);
    for (int i = 0; i < conf->nlimits; i++) {
        const limit_conf_t *l = &conf->limits[i];
        if (!limit_applies_to(l, p->queues, p->nqueues)) continue;
        char *id = limit_key_id(l);
        qlimits_add(&wl->ls, prefix, id, l->class_name, l->queue, l->concurrency, l->rate ? l->rate_per_s : 0,
                    l->burst);
        free(id);
    }
}

void wlimits_free(wlimits_t *wl)
{
    qlimits_free(&wl->ls);
}

const qlimits_t *wlimits_for_pop(wlimits_t *wl, const char **token)
{
    *token = NULL;
    if (!wl->ls.n) return NULL;
    uuid4(wl->token);
    *token = wl->token;
    return &wl->ls;
}

void wlimits_taken(wlimits_t *wl, int64_t now_ms)
{
    if (!wl->ls.n) return;
    wl->held = true;
    wl->next_beat_ms = now_ms + QLIMIT_BEAT_MS;
}

int64_t wlimits_next_beat(const wlimits_t *wl)
{
    return wl->held ? wl->next_beat_ms : INT64_MAX;
}

/* How many concurrency slots a job of class cls on queue holds (as the
 * limited pop decides: exact names, "" for any). */
static int slots_of(const wlimits_t *wl, const char *queue, const char *cls)
{
    int n = 0;
    for (int i = 0; i < wl->ls.n; i++) {
        const qlimit_t *l = &wl->ls.v[i];
        n += l->concurrency > 0 && (!*l->queue || !strcmp(l->queue, queue)) &&
             (!*l->class_name || (cls && !strcmp(l->class_name, cls)));
    }
    return n;
}

void wlimits_beat(wlimits_t *wl, rconn_t *c, int64_t now_ms, const char *queue, const char *cls, const char *job)
{
    if (!wl->held || now_ms < wl->next_beat_ms) return;
    wl->next_beat_ms = now_ms + QLIMIT_BEAT_MS;
    int want = slots_of(wl, queue, cls);
    if (!want) return;
    int n = qlimit_beat(c, &wl->ls, wl->token);
    if (n >= 0 && n < want)
        log_warn("job %s: its concurrency slot lapsed (not renewed for %d s): its limit may be exceeded", job,
                 QLIMIT_SLOT_TTL_MS / 1000);
}

void wlimits_end(wlimits_t *wl, rconn_t *c)
{
    if (!wl->held) return;
    wl->held = false;
    if (qlimit_end(c, &wl->ls, wl->token) < 0)
        log_warn("could not give back a concurrency slot: it lapses within %d s", QLIMIT_SLOT_TTL_MS / 1000);
}
