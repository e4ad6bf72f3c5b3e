/*
 * mconn.c - the master's own Redis connections (see mconn.h).
 */
#include "master/mconn.h"
#include "redis/failed.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

struct mconns {
    rconn_t **rc;               /* by connection name */
    uint64_t *noted;            /* rc[i]->connects when its queues were last noted (failed.c) */
    int nrc;
    uint64_t reconnects_dropped; /* of connections closed by a reload */
};

rconn_t *mconn_get(master_t *m, const char *name)
{
    if (!m->conns) m->conns = xcalloc(1, sizeof *m->conns);
    struct mconns *s = m->conns;
    for (int i = 0; i < s->nrc; i++)
        if (!strcmp(s->rc[i]->name, name)) return s->rc[i];
    const redis_conf_t *rc = config_redis(m->conf, name);
    if (!rc) return NULL;
    s->rc = xrealloc(s->rc, sizeof *s->rc * (size_t)(s->nrc + 1));
    s->noted = xrealloc(s->noted, sizeof *s->noted * (size_t)(s->nrc + 1));
    s->noted[s->nrc] = 0;
    s->rc[s->nrc] = rconn_new(rc);
    if (s->rc[s->nrc]->conf.timeout > MCONN_TIMEOUT_S) s->rc[s->nrc]->conf.timeout = MCONN_TIMEOUT_S;
    return s->rc[s->nrc++];
}

void mconn_drop_all(master_t *m)
{
    struct mconns *s = m->conns;
    if (!s) return;
    for (int i = 0; i < s->nrc; i++) {
        s->reconnects_dropped += rconn_reconnects(s->rc[i]);
        rconn_free(s->rc[i]);
    }
    free(s->rc);
    free(s->noted);
    s->rc = NULL;
    s->noted = NULL;
    s->nrc = 0;
}

uint64_t mconn_reconnects(const master_t *m)
{
    const struct mconns *s = m->conns;
    if (!s) return 0;
    uint64_t n = s->reconnects_dropped;
    for (int i = 0; i < s->nrc; i++) n += rconn_reconnects(s->rc[i]);
    return n;
}

void mconn_note_queues(master_t *m, rconn_t *c, const char *name)
{
    struct mconns *s = m->conns;
    int ci = 0;
    while (s->rc[ci] != c) ci++;
    if (!rconn_is_cluster(c) || s->noted[ci] == c->connects) return;
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
    if (failed_note_queues(c, qs, n) == 0) s->noted[ci] = c->connects;
    free(qs);
}

void mconn_free(master_t *m)
{
    mconn_drop_all(m);
    free(m->conns);
    m->conns = NULL;
}
