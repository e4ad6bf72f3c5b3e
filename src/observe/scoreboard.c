/*
 * scoreboard.c - see scoreboard.h.
 */
#include "observe/scoreboard.h"
#include "core/util.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

_Static_assert(sizeof(sb_slot_t) == SB_SLOT_SIZE, "a scoreboard slot is one page");

int sb_create(scoreboard_t *sb, int nslots)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || SB_SLOT_SIZE % page) {
        errno = EINVAL;
        return -1;
    }
    size_t len = sizeof(sb_slot_t) * (size_t)nslots;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    sb->slots = p;           /* anonymous mappings are zero-filled: every slot SB_FREE */
    sb->nslots = nslots;
    return 0;
}

int sb_confine(scoreboard_t *sb, int idx)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || SB_SLOT_SIZE % page) return -1;
    char *base = (char *)sb->slots;
    size_t before = SB_SLOT_SIZE * (size_t)idx;
    size_t after = SB_SLOT_SIZE * (size_t)(sb->nslots - idx - 1);
    if (before && munmap(base, before) < 0) return -1;
    if (after && munmap(base + before + SB_SLOT_SIZE, after) < 0) return -1;
    return 0;
}

void sb_destroy(scoreboard_t *sb)
{
    if (sb->slots) munmap(sb->slots, sizeof(sb_slot_t) * (size_t)sb->nslots);
    sb->slots = NULL;
    sb->nslots = 0;
}

int sb_alloc(scoreboard_t *sb)
{
    for (int i = 0; i < sb->nslots; i++) {
        sb_slot_t *s = &sb->slots[i];
        if (s->pid == 0 && s->c.state == SB_FREE) {
            atomic_store(&s->seq, 0);
            atomic_store(&s->control, 0);
            atomic_store(&s->stop_job_ms, 0);
            atomic_store(&s->watch_gen, 0);
            s->pid = -1; /* reserved */
            s->started_ms = 0;
            s->pool[0] = '\0';
            s->native = 0;
            memset(&s->c, 0, sizeof s->c);
            s->c.state = SB_STARTING;
            return i;
        }
    }
    return -1;
}

void sb_release(scoreboard_t *sb, int idx)
{
    sb_slot_t *s = &sb->slots[idx];
    s->pid = 0;
    memset(&s->c, 0, sizeof s->c);
    atomic_store(&s->control, 0);
    atomic_store(&s->stop_job_ms, 0);
    atomic_store(&s->watch_gen, 0);
}

void sb_stop_ask(sb_slot_t *s, int64_t started_ms)
{
    atomic_store(&s->stop_job_ms, started_ms);
}

bool sb_stop_asked(const sb_slot_t *s)
{
    int64_t at = atomic_load((_Atomic int64_t *)&s->stop_job_ms);
    return at && at == s->c.job_started_ms;
}

void sb_job_started(sb_slot_t *s, int64_t started_ms)
{
    atomic_store(&s->stop_job_ms, 0); /* before the new start is seen: a request from now on is for this job */
    s->c.job_started_ms = started_ms;
}

void sb_write_begin(sb_slot_t *s)
{
    atomic_fetch_add_explicit(&s->seq, 1, memory_order_acq_rel);
    atomic_thread_fence(memory_order_release);
}

void sb_write_end(sb_slot_t *s)
{
    atomic_thread_fence(memory_order_release);
    atomic_fetch_add_explicit(&s->seq, 1, memory_order_acq_rel);
}

/* The child's strings, as the master may use them: terminated, and valid
 * UTF-8 whatever the child wrote (a child is never trusted). */
static void sb_terminate(sb_child_t *out)
{
    utf8_scrub(out->job_id, sizeof out->job_id);
    utf8_scrub(out->job_uuid, sizeof out->job_uuid);
    utf8_scrub(out->job_name, sizeof out->job_name);
    utf8_scrub(out->job_queue, sizeof out->job_queue);
    utf8_scrub(out->job_tags, sizeof out->job_tags); /* keeps its '\n's */
}

void sb_read(const sb_slot_t *s, sb_child_t *out)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t a = atomic_load_explicit((_Atomic uint32_t *)&s->seq, memory_order_acquire);
        if (a & 1) continue;
        memcpy(out, &s->c, sizeof *out);
        atomic_thread_fence(memory_order_acquire);
        uint32_t b = atomic_load_explicit((_Atomic uint32_t *)&s->seq, memory_order_acquire);
        if (a == b) {
            sb_terminate(out);
            return;
        }
    }
    /* A writer stuck mid-update (killed while writing): take what is there. */
    memcpy(out, &s->c, sizeof *out);
    sb_terminate(out);
}

const char *sb_state_name(int state)
{
    switch (state) {
    case SB_FREE: return "free";
    case SB_STARTING: return "starting";
    case SB_IDLE: return "idle";
    case SB_BUSY: return "busy";
    case SB_PAUSED: return "paused";
    case SB_STOPPING: return "stopping";
    case SB_RUNNING: return "running";
    default: return "?";
    }
}
