/*
 * respawn.c - the respawn backoff (see respawn.h). Pure.
 */
#include "master/respawn.h"

static int back_off(respawn_t *st)
{
    st->backoff_s = st->backoff_s ? st->backoff_s * 2 : 1;
    if (st->backoff_s > RESPAWN_MAX_S) st->backoff_s = RESPAWN_MAX_S;
    return st->backoff_s;
}

enum respawn_verdict respawn_after_exit(respawn_t *st, const exit_facts_t *f, int *delay_s)
{
    if (f->lived_ms >= RESPAWN_HEALTHY_MS || f->did_work) {
        /* it was healthy: not a loop */
        st->backoff_s = 0;
        st->quick_exits = 0;
    }
    if (!f->clean) {
        *delay_s = back_off(st);
        return RESPAWN_CRASHED;
    }
    bool quick_idle = f->lived_ms < RESPAWN_QUICK_MS && !f->did_work;
    st->quick_exits = quick_idle ? st->quick_exits + 1 : 0;
    if (st->quick_exits < RESPAWN_QUICK_LIMIT) {
        *delay_s = 0;
        return RESPAWN_NOW;
    }
    *delay_s = back_off(st);
    return RESPAWN_QUICK_LOOP;
}
