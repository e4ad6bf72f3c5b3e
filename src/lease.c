/*
 * lease.c - see lease.h.
 */
#include "lease.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS: the pool's leases. ARGV: id, ttl ms, budget, floor, want, pressure,
 * claim, keep. Returns {now, budget in effect, held, id, record, ...}. */
static const char LEASE_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local me, ttl, budget = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "local floor, want, pressure = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])\n"
    "local claim, keep = tonumber(ARGV[7]), tonumber(ARGV[8])\n"
    "local all = redis.call('HGETALL', KEYS[1])\n"
    "local cap, others, mine, since, out = budget, 0, 0, 0, {}\n"
    "for i = 1, #all, 2 do\n"
    "  local h, f, w, p, b, e, s = string.match(all[i + 1],\n"
    "    '^(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+)$')\n"
    "  if not h or tonumber(e) <= now then\n"
    "    redis.call('HDEL', KEYS[1], all[i])\n"
    "  elseif all[i] == me then\n"
    "    mine, since = tonumber(h), tonumber(s)\n"
    "  else\n"
    "    others = others + tonumber(h)\n"
    "    if tonumber(b) < cap then cap = tonumber(b) end\n"
    "    out[#out + 1] = all[i]\n"
    "    out[#out + 1] = all[i + 1]\n"
    "  end\n"
    "end\n"
    "local held\n"
    "if claim <= mine then\n"
    "  held = math.max(claim, math.min(keep, mine))\n"
    "else\n"
    "  held = math.max(mine, math.min(claim, cap - others))\n"
    "end\n"
    "if want <= held then since = 0 elseif since == 0 then since = now end\n"
    "local rec = string.format('%d,%d,%d,%d,%d,%d,%d', held, floor, want, pressure, budget, now + ttl, since)\n"
    "redis.call('HSET', KEYS[1], me, rec)\n"
    "if redis.call('PTTL', KEYS[1]) < 2 * ttl then redis.call('PEXPIRE', KEYS[1], 2 * ttl) end\n"
    "out[#out + 1] = me\n"
    "out[#out + 1] = rec\n"
    "table.insert(out, 1, held)\n"
    "table.insert(out, 1, cap)\n"
    "table.insert(out, 1, now)\n"
    "return out\n";

/* KEYS: the pool's leases. ARGV: id. */
static const char RELEASE_LUA[] = "return redis.call('HDEL', KEYS[1], ARGV[1])\n";

/* KEYS: the pool's leases. Read-only: {now, budget in effect, -1, id, record, ...}. */
static const char LIST_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local all = redis.call('HGETALL', KEYS[1])\n"
    "local cap, out = -1, {}\n"
    "for i = 1, #all, 2 do\n"
    "  local b, e = string.match(all[i + 1], '^%d+,%d+,%d+,%d+,(%d+),(%d+),%d+$')\n"
    "  if b and tonumber(e) > now then\n"
    "    if cap < 0 or tonumber(b) < cap then cap = tonumber(b) end\n"
    "    out[#out + 1] = all[i]\n"
    "    out[#out + 1] = all[i + 1]\n"
    "  end\n"
    "end\n"
    "table.insert(out, 1, -1)\n"
    "table.insert(out, 1, cap)\n"
    "table.insert(out, 1, now)\n"
    "return out\n";

static rscript_t s_lease, s_release, s_list;

static void scripts_init(void)
{
    if (s_lease.body) return;
    rscript_init(&s_lease, LEASE_LUA);
    rscript_init(&s_release, RELEASE_LUA);
    rscript_init(&s_list, LIST_LUA);
}

char *lease_key(const rconn_t *c, const char *pool)
{
    return xasprintf("%sqpool:{qpool-budget:%s}:leases", c->conf.prefix, pool);
}

/* The request as the script's arguments (numbers into buf). */
static void req_argv(const lease_req_t *r, const char *key, char buf[7][24], const char *argv[9])
{
    snprintf(buf[0], 24, "%" PRId64, r->ttl_ms);
    snprintf(buf[1], 24, "%d", r->budget);
    snprintf(buf[2], 24, "%d", r->floor);
    snprintf(buf[3], 24, "%d", r->want);
    snprintf(buf[4], 24, "%" PRId64, r->pressure);
    snprintf(buf[5], 24, "%d", r->claim);
    snprintf(buf[6], 24, "%d", r->keep);
    argv[0] = key;
    argv[1] = r->id;
    for (int i = 0; i < 7; i++) argv[2 + i] = buf[i];
}

/* Queue one pool's script. */
static void append_one(rconn_t *c, const char *key, const lease_req_t *r)
{
    char buf[7][24];
    const char *argv[9];
    req_argv(r, key, buf, argv);
    rconn_append_script(c, &s_lease, 1, 9, argv, NULL);
}

/* A reply into *out, or -1 (out unchanged). */
static int take_reply(redisReply *rep, lease_view_t *out)
{
    lease_view_t v = {0};
    int rv = lease_parse(rep, &v);
    freeReplyObject(rep);
    if (rv < 0) return -1;
    lease_view_free(out);
    *out = v;
    return 0;
}

/* One pool's script at once, EVAL if the server does not know it yet. */
static int run_one(rconn_t *c, const char *key, const lease_req_t *r, lease_view_t *out)
{
    char buf[7][24];
    const char *argv[9];
    req_argv(r, key, buf, argv);
    redisReply *rep = NULL;
    if (rconn_script(c, &s_lease, 1, 9, argv, NULL, -1, -1, &rep) != RC_OK) return -1;
    return take_reply(rep, out);
}

int lease_batch(rconn_t *c, char *const *keys, const lease_req_t *reqs, int n, lease_view_t *views, bool *ok)
{
    scripts_init();
    for (int i = 0; i < n; i++) ok[i] = false;
    if (n == 0) return 0;
    if (rconn_ensure(c) < 0) return -1;
    for (int i = 0; i < n; i++) append_one(c, keys[i], &reqs[i]);
    bool *again = xcalloc((size_t)n, sizeof *again);
    int good = 0, i = 0;
    for (; i < n; i++) {
        redisReply *rep = NULL;
        if (rconn_read(c, -1, -1, &rep) != RC_OK) break; /* dropped: the rest is lost */
        if (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "NOSCRIPT", 8)) {
            freeReplyObject(rep); /* the batch's later replies first */
            again[i] = true;
            continue;
        }
        ok[i] = take_reply(rep, &views[i]) == 0;
    }
    for (int j = 0; j < i; j++)
        if (again[j]) ok[j] = run_one(c, keys[j], &reqs[j], &views[j]) == 0;
    for (int j = 0; j < n; j++) good += ok[j];
    free(again);
    return i < n && !good ? -1 : good;
}

static int run_simple(rconn_t *c, const rscript_t *s, int argc, const char **argv, redisReply **out)
{
    if (rconn_ensure(c) < 0) return -1;
    if (rconn_script(c, s, 1, argc, argv, NULL, -1, -1, out) != RC_OK) return -1;
    if ((*out)->type == REDIS_REPLY_ERROR) {
        freeReplyObject(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int lease_release(rconn_t *c, const char *key, const char *id)
{
    scripts_init();
    const char *argv[] = {key, id};
    redisReply *r = NULL;
    if (run_simple(c, &s_release, 2, argv, &r) < 0) return -1;
    freeReplyObject(r);
    return 0;
}

int lease_list(rconn_t *c, const char *key, lease_view_t *out)
{
    scripts_init();
    const char *argv[] = {key};
    redisReply *r = NULL;
    if (run_simple(c, &s_list, 1, argv, &r) < 0) return -1;
    return take_reply(r, out);
}

/* "held,floor,want,pressure,budget,expiry,waiting_since", strictly. */
static int parse_record(const redisReply *id, const redisReply *rec, budget_host_t *h)
{
    if (id->type != REDIS_REPLY_STRING || rec->type != REDIS_REPLY_STRING) return -1;
    if (id->len == 0 || id->len >= sizeof h->id || memchr(id->str, '\0', id->len)) return -1;
    char s[200];
    if (rec->len >= sizeof s) return -1;
    memcpy(s, rec->str, rec->len);
    s[rec->len] = '\0';
    long long v[7];
    char *p = s;
    for (int i = 0; i < 7; i++) {
        char *end;
        if (*p < '0' || *p > '9') return -1;
        v[i] = strtoll(p, &end, 10);
        if (*end != (i < 6 ? ',' : '\0') || v[i] < 0) return -1;
        p = end + (i < 6);
    }
    if (v[0] > 1000000 || v[1] > 1000000 || v[2] > 1000000 || v[4] > 1000000) return -1;
    memcpy(h->id, id->str, id->len);
    h->id[id->len] = '\0';
    h->held = (int)v[0];
    h->floor = (int)v[1];
    h->want = (int)v[2];
    h->pressure = v[3];
    h->budget = (int)v[4];
    h->waiting_since = v[6];
    return 0;
}

int lease_parse(const redisReply *r, lease_view_t *out)
{
    memset(out, 0, sizeof *out);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->elements % 2 == 0) return -1;
    for (int i = 0; i < 3; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER) return -1;
    out->now_ms = r->element[0]->integer;
    out->budget = (int)r->element[1]->integer;
    out->held = (int)r->element[2]->integer;
    size_t pairs = (r->elements - 3) / 2;
    if (pairs > LEASE_MAX_HOLDERS) pairs = LEASE_MAX_HOLDERS;
    out->hosts = xcalloc(pairs + 1, sizeof *out->hosts);
    for (size_t i = 0; i < pairs; i++)
        if (parse_record(r->element[3 + 2 * i], r->element[4 + 2 * i], &out->hosts[out->n]) == 0) out->n++;
    return 0;
}

void lease_view_free(lease_view_t *v)
{
    free(v->hosts);
    memset(v, 0, sizeof *v);
}
