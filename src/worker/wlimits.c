/*
 * wlimits.c - see wlimits.h.
 */
#include "worker/wlimits.h"
#include "core/log.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

void wlimits_init(wlimits_t *wl, const qconf_t *conf, const pool_conf_t *p, const char *prefix, bool cluster)
{
    memset(wl, 0, sizeof *wl);
    wl->ls.cluster = cluster;
    for (int i = 0; i < conf->nlimits; i++) {
        const limit_conf_t *l = &conf->limits[i];
        if (!limit_applies_to(l, p->queues, p->nqueues)) continue;
        char *id = limit_key_id(l);
        qlimits_add(&wl->ls, prefix, id, l->class_name, l->queue, l->concurrency, l->rate ? l->rate_per_s : 0,
                    l->burst);
        qlimits_set_tag_prefix(&wl->ls, l->tag_prefix);
        free(id);
    }
    wl->nconf = wl->ls.n;
    wl->prefix = xstrdup(prefix);
    wl->paused_key = qlimit_paused_key(prefix, cluster);
    wl->pool = xstrdup(p->name ? p->name : "");
}

/* Forget the per-key slots the last job took. */
static void drop_keys(wlimits_t *wl)
{
    for (int i = 0; i < wl->nx; i++) free(wl->xkeys[i]);
    free(wl->xkeys);
    wl->xkeys = NULL;
    wl->nx = 0;
}

void wlimits_free(wlimits_t *wl)
{
    drop_keys(wl);
    qlimits_free(&wl->ls);
    FREE_ALL(wl->prefix, wl->paused_key, wl->pool);
}

/* Does a field of the paused classes' hash hold this pool's jobs? "<class>"
 * holds every pool's, "<class>@<pool>" that pool's only (a class has no
 * '@'). (pure) */
static bool paused_here(const wlimits_t *wl, const char *field)
{
    const char *at = strchr(field, '@');
    return !at || !strcmp(at + 1, wl->pool);
}

/* Whether the paused classes held now are exactly the reply's that hold
 * here (each held under its own key, paused:<field>). */
static bool same_paused(const wlimits_t *wl, const redisReply *r)
{
    int want = 0;
    for (size_t i = 0; i < r->elements; i++) {
        if (!paused_here(wl, r->element[i]->str)) continue;
        want++;
        char *id = xasprintf("paused:%s", r->element[i]->str), *key = qlimit_key(wl->prefix, id, wl->ls.cluster);
        bool found = false;
        for (int k = wl->nconf; k < wl->ls.n && !found; k++) found = !strcmp(wl->ls.v[k].key, key);
        FREE_ALL(id, key);
        if (!found) return false;
    }
    return want == wl->ls.n - wl->nconf;
}

/* A field that holds here, as a limit that never has room. */
static void add_paused(wlimits_t *wl, const char *field)
{
    const char *at = strchr(field, '@');
    if (!at) {
        qlimits_add_paused(&wl->ls, wl->prefix, field);
        return;
    }
    char *id = xasprintf("paused:%s", field), *cls = xstrndup(field, (size_t)(at - field));
    qlimits_add(&wl->ls, wl->prefix, id, cls, "", QLIMIT_PAUSED, 0, 1);
    FREE_ALL(id, cls);
}

int wlimits_poll_paused(wlimits_t *wl, rconn_t *c, int64_t now_ms)
{
    if (now_ms < wl->next_paused_ms) return 0;
    wl->next_paused_ms = now_ms + QLIMIT_PAUSED_POLL_MS;
    const char *argv[] = {"HKEYS", wl->paused_key};
    redisReply *r = rconn_call(c, 2, argv, NULL);
    if (!r) return -1;
    bool ok = r->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < r->elements; i++) ok = r->element[i]->type == REDIS_REPLY_STRING;
    if (!ok && !wl->paused_key_bad)
        log_warn("%s is not a hash of class names: the paused classes stay as they were", wl->paused_key);
    wl->paused_key_bad = !ok; /* said once, again only after it was right */
    if (!ok || same_paused(wl, r)) {
        freeReplyObject(r);
        return 0;
    }
    bool was = wl->ls.n > wl->nconf;
    qlimits_truncate(&wl->ls, wl->nconf); /* paused classes hold no slots: a running job's are unchanged */
    for (size_t i = 0; i < r->elements; i++)
        if (paused_here(wl, r->element[i]->str)) add_paused(wl, r->element[i]->str);
    size_t n = (size_t)(wl->ls.n - wl->nconf);
    freeReplyObject(r);
    log_info("paused classes now: %zu (their jobs stay in their queues)", n);
    return !was && wl->ls.n > wl->nconf ? 1 : 0;
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

void wlimits_taken_keys(wlimits_t *wl, char *const *keys, int n)
{
    drop_keys(wl);
    if (!wl->held || n <= 0) return;
    wl->xkeys = xcalloc((size_t)n, sizeof *wl->xkeys);
    for (int i = 0; i < n; i++) wl->xkeys[i] = xstrdup(keys[i]);
    wl->nx = n;
}

int64_t wlimits_next_beat(const wlimits_t *wl)
{
    return wl->held ? wl->next_beat_ms : INT64_MAX;
}

void wlimits_beat(wlimits_t *wl, rconn_t *c, int64_t now_ms, const char *job)
{
    if (!wl->held || now_ms < wl->next_beat_ms) return;
    wl->next_beat_ms = now_ms + QLIMIT_BEAT_MS;
    int want = wl->nx;
    if (!want) return;
    int n = qlimit_beat(c, &wl->ls, wl->token, wl->xkeys, wl->nx);
    if (n >= 0 && n < want)
        log_warn("job %s: its concurrency slot lapsed (not renewed for %d s): its limit may be exceeded", job,
                 QLIMIT_SLOT_TTL_MS / 1000);
}

void wlimits_end(wlimits_t *wl, rconn_t *c)
{
    if (!wl->held) return;
    wl->held = false;
    if (!wl->nx) return; /* a rate or a paused class only: nothing to give back */
    if (qlimit_end(c, &wl->ls, wl->token, wl->xkeys, wl->nx) < 0)
        log_warn("could not give back a concurrency slot: it lapses within %d s", QLIMIT_SLOT_TTL_MS / 1000);
    drop_keys(wl);
}
