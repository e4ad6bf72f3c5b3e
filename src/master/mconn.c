/*
 * mconn.c - the master's own Redis connections (see mconn.h).
 */
#include "master/mconn.h"
#include "redis/failed.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

/* One connection by name, and its connect count when its queues were last
 * noted in the failed store (failed.c, Cluster only). */
struct mconn {
    rconn_t *rc;
    uint64_t noted;
};

struct mconns {
    struct mconn *v;
    int n;
    uint64_t reconnects_dropped; /* of connections closed by a reload */
};

static struct mconn *find(struct mconns *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].rc->name, name)) return &s->v[i];
    return NULL;
}

rconn_t *mconn_get(master_t *m, const char *name)
{
    if (m->conf->no_redis) return NULL; /* no Redis at all: nothing to open, nothing to log */
    if (!m->conns) m->conns = xcalloc(1, sizeof *m->conns);
    struct mconns *s = m->conns;
    struct mconn *e = find(s, name);
    if (e) return e->rc;
    const redis_conf_t *rc = config_redis(m->conf, name);
    if (!rc) return NULL;
    s->v = xrealloc(s->v, sizeof *s->v * (size_t)(s->n + 1));
    e = &s->v[s->n++];
    *e = (struct mconn){.rc = rconn_new(rc)};
    if (e->rc->conf.timeout > MCONN_TIMEOUT_S) e->rc->conf.timeout = MCONN_TIMEOUT_S;
    return e->rc;
}

void mconn_drop_all(master_t *m)
{
    struct mconns *s = m->conns;
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        s->reconnects_dropped += rconn_reconnects(s->v[i].rc);
        rconn_free(s->v[i].rc);
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

void mconn_wipe_secrets(master_t *m)
{
    struct mconns *s = m->conns;
    for (int i = 0; s && i < s->n; i++) rconn_wipe_secrets(s->v[i].rc);
}

uint64_t mconn_reconnects(const master_t *m)
{
    const struct mconns *s = m->conns;
    if (!s) return 0;
    uint64_t n = s->reconnects_dropped;
    for (int i = 0; i < s->n; i++) n += rconn_reconnects(s->v[i].rc);
    return n;
}

void mconn_note_queues(master_t *m, rconn_t *c, const char *name)
{
    struct mconn *e = find(m->conns, name);
    if (!e || !rconn_is_cluster(c) || e->noted == c->connects) return;
    int n = 0;
    for (int i = 0; i < m->pools.n; i++)
        if (!strcmp(m->pools.v[i]->conf.connection, name)) n += m->pools.v[i]->conf.nqueues;
    const char **qs = xcalloc((size_t)n + 1, sizeof *qs);
    n = 0;
    for (int i = 0; i < m->pools.n; i++) {
        const pool_conf_t *p = &m->pools.v[i]->conf;
        if (strcmp(p->connection, name)) continue;
        for (int j = 0; j < p->nqueues; j++) qs[n++] = p->queues[j];
    }
    if (failed_note_queues(c, qs, n) == 0) e->noted = c->connects;
    free(qs);
}

void mconn_free(master_t *m)
{
    mconn_drop_all(m);
    free(m->conns);
    m->conns = NULL;
}
