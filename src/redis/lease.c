/*
 * lease.c - see lease.h.
 */
#include "redis/lease.h"
#include "core/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEASE_HEAD 4 /* now, budget in effect, held, prior: then the records */

#define STR_(x) #x
#define STR(x) STR_(x)

/* The record check both scripts make (lease.h; lease_parse makes the same
 * in C): nil, or the 7 fields as numbers. Digits are counted before any
 * is converted; 16 digits stay exact in a Lua number. */
#define LEASE_LUA_PARSE                                                                                      \
    "local MAXH, BMAX, HMAX, EMAX = " STR(LEASE_MAX_HOLDERS) ", " STR(LEASE_BUDGET_MAX) ", "                 \
    STR(LEASE_HELD_MAX) ", " STR(LEASE_EXPIRY_MAX_MS) "\n"                                                    \
    "local DIGITS = {7, 7, 7, 16, 7, 16, 16}\n"                                                              \
    "local function parse(id, rec, now)\n"                                                                   \
    "  if #id < 1 or #id > " STR(BUDGET_ID_MAX) " or string.find(id, '[^!-~]') or #rec > 100 then return nil end\n" \
    "  local f = {string.match(rec, '^(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+)$')}\n"                      \
    "  if #f ~= 7 then return nil end\n"                                                                     \
    "  for i = 1, 7 do\n"                                                                                    \
    "    if #f[i] > DIGITS[i] then return nil end\n"                                                         \
    "    f[i] = tonumber(f[i])\n"                                                                            \
    "  end\n"                                                                                                \
    "  local b = f[5]\n"                                                                                     \
    "  if b < 1 or b > BMAX or f[2] > b or f[3] > b or f[1] > math.max(b, HMAX) or f[4] > 2^50\n"          \
    "     or f[6] <= now or f[6] > now + EMAX then return nil end\n"                                          \
    "  return f\n"                                                                                           \
    "end\n"                                                                                                  \
    "local function too_many(key)\n"                                                                         \
    "  local n = redis.call('HLEN', key)\n"                                                                  \
    "  if n <= MAXH then return nil end\n"                                                                   \
    "  return redis.error_reply('QPOOLBUDGET ' .. key .. ' holds ' .. n .. ' records, more than ' .. MAXH ..\n" \
    "    ' masters: not all of them are qpool\\'s; delete the key (the masters re-register at their next pass)')\n" \
    "end\n"                                                                                                  \
    "local t = redis.call('TIME')\n"                                                                         \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

/* KEYS: the pool's leases. ARGV: id, ttl ms, budget, floor, want, pressure,
 * claim, keep, had. Returns {now, budget in effect, held, prior, id, record,
 * ...}: the caller's record first; prior: what its record held before, -1
 * when it had none. had = 1: the caller renewed its record within half the
 * TTL; if it is gone all the same, records were lost (lease.h): nothing
 * new is granted. A record that is not qpool's is deleted and
 * counted nowhere. held: the claim out of free slots (never less than it
 * held), at least keep. */
static const char LEASE_LUA[] =
    LEASE_LUA_PARSE
    "local err = too_many(KEYS[1])\n"
    "if err then return err end\n"
    "local me, ttl, budget = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "local floor, want, pressure = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])\n"
    "local claim, keep, had = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9] == '1'\n"
    "local all = redis.call('HGETALL', KEYS[1])\n"
    "local cap, others, mine, since, prior, rest = budget, 0, 0, 0, -1, {}\n"
    "for i = 1, #all, 2 do\n"
    "  local f = parse(all[i], all[i + 1], now)\n"
    "  if not f then\n"
    "    redis.call('HDEL', KEYS[1], all[i])\n"
    "  elseif all[i] == me then\n"
    "    mine, since, prior = f[1], f[7], f[1]\n"
    "  else\n"
    "    others = others + f[1]\n"
    "    if f[5] < cap then cap = f[5] end\n"
    "    rest[#rest + 1] = all[i]\n"
    "    rest[#rest + 1] = all[i + 1]\n"
    "  end\n"
    "end\n"
    "if had and prior < 0 then claim = 0 end\n"
    "local held = claim\n"
    "if claim > mine then held = math.max(mine, math.min(claim, cap - others)) end\n"
    "held = math.max(held, keep)\n"
    "if want <= held then since = 0 elseif since == 0 then since = now end\n"
    "local rec = string.format('%d,%d,%d,%d,%d,%d,%d', held, floor, want, pressure, budget, now + ttl, since)\n"
    "redis.call('HSET', KEYS[1], me, rec)\n"
    "if redis.call('PTTL', KEYS[1]) < 2 * ttl then redis.call('PEXPIRE', KEYS[1], 2 * ttl) end\n"
    "local out = {now, cap, held, prior, me, rec}\n"
    "for i = 1, #rest do out[#out + 1] = rest[i] end\n"
    "return out\n";

/* KEYS: the pool's leases. ARGV: id. */
static const char RELEASE_LUA[] = "return redis.call('HDEL', KEYS[1], ARGV[1])\n";

/* KEYS: the pool's leases. Read-only: {now, budget in effect, -1, -1, id, record, ...}. */
static const char LIST_LUA[] =
    LEASE_LUA_PARSE
    "local err = too_many(KEYS[1])\n"
    "if err then return err end\n"
    "local all = redis.call('HGETALL', KEYS[1])\n"
    "local out = {now, -1, -1, -1}\n"
    "for i = 1, #all, 2 do\n"
    "  local f = parse(all[i], all[i + 1], now)\n"
    "  if f then\n"
    "    if out[2] < 0 or f[5] < out[2] then out[2] = f[5] end\n"
    "    out[#out + 1] = all[i]\n"
    "    out[#out + 1] = all[i + 1]\n"
    "  end\n"
    "end\n"
    "return out\n";

static rscript_t s_lease, s_release, s_list;

static void scripts_init(void)
{
    if (s_lease.body) return;
    rscript_init(&s_lease, LEASE_LUA);
    rscript_init(&s_release, RELEASE_LUA);
    rscript_init(&s_list, LIST_LUA);
}

void lease_holder_prefix(char *buf, size_t n, pid_t pid)
{
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if (*p < '!' || *p > '~') *p = '?';
    host[64] = '\0'; /* room for the rest within BUDGET_ID_MAX */
    snprintf(buf, n, "%s:%d:", host, (int)pid);
}

void lease_holder_id(char *buf, size_t n)
{
    char prefix[100];
    lease_holder_prefix(prefix, sizeof prefix, getpid());
    uint32_t nonce;
    random_bytes(&nonce, sizeof nonce);
    snprintf(buf, n, "%s%08x", prefix, nonce);
}

char *lease_key(const rconn_t *c, const char *pool)
{
    return xasprintf("%sqpool:{qpool-budget:%s}:leases", c->conf.prefix, pool);
}

/* The request as the script's arguments (numbers into buf). */
static void req_argv(const lease_req_t *r, const char *key, char buf[8][24], const char *argv[10])
{
    snprintf(buf[0], 24, "%" PRId64, r->ttl_ms);
    snprintf(buf[1], 24, "%d", r->budget);
    snprintf(buf[2], 24, "%d", r->floor);
    snprintf(buf[3], 24, "%d", r->want);
    snprintf(buf[4], 24, "%" PRId64, r->pressure);
    snprintf(buf[5], 24, "%d", r->claim);
    snprintf(buf[6], 24, "%d", r->keep);
    snprintf(buf[7], 24, "%d", r->had ? 1 : 0);
    argv[0] = key;
    argv[1] = r->id;
    for (int i = 0; i < 8; i++) argv[2 + i] = buf[i];
}

/* Queue one pool's script. */
static void append_one(rconn_t *c, const char *key, const lease_req_t *r)
{
    char buf[8][24];
    const char *argv[10];
    req_argv(r, key, buf, argv);
    rconn_append_script(c, &s_lease, 1, 10, argv, NULL);
}

/* An error text from the server, fit for a log line and a terminal. */
static void printable(char *s)
{
    for (; *s; s++)
        if (*s < ' ' || *s > '~') *s = '?';
}

/* Why the connection failed. */
static void conn_error(const rconn_t *c, lease_status_t *st)
{
    snprintf(st->err, sizeof st->err, "%s", c->last_error[0] ? c->last_error : "Redis unreachable");
    printable(st->err);
}

/* Why a reply is not a view: Redis's error, or a reply we cannot read. */
static void reply_error(const redisReply *rep, lease_status_t *st)
{
    if (rep->type == REDIS_REPLY_ERROR)
        snprintf(st->err, sizeof st->err, "%.*s", (int)(rep->len < 190 ? rep->len : 190), rep->str);
    else
        snprintf(st->err, sizeof st->err, "a reply that is not the lease script's");
    printable(st->err);
}

/* A reply into *out, or -1 (out unchanged; st, if any, says why). */
static int take_reply(redisReply *rep, lease_view_t *out, lease_status_t *st)
{
    lease_view_t v = {0};
    int rv = lease_parse(rep, &v);
    if (rv < 0 && st) reply_error(rep, st);
    freeReplyObject(rep);
    if (rv < 0) return -1;
    lease_view_free(out);
    *out = v;
    return 0;
}

/* One pool's script at once, EVAL if the server does not know it yet. */
static int run_one(rconn_t *c, const char *key, const lease_req_t *r, lease_view_t *out, lease_status_t *st)
{
    char buf[8][24];
    const char *argv[10];
    req_argv(r, key, buf, argv);
    redisReply *rep = NULL;
    if (rconn_script(c, &s_lease, 1, 10, argv, NULL, -1, -1, &rep) != RC_OK) {
        if (st) conn_error(c, st);
        return -1;
    }
    return take_reply(rep, out, st);
}

/* Read the batch's replies in order; NOSCRIPT ones are marked for a retry
 * (the batch's later replies first). Returns how many were read. */
static int read_batch(rconn_t *c, int n, lease_view_t *views, lease_status_t *st, bool *again, bool *readonly)
{
    for (int i = 0; i < n; i++) {
        redisReply *rep = NULL;
        if (rconn_read(c, -1, -1, &rep) != RC_OK) { /* dropped: the rest is lost */
            for (int j = i; j < n; j++) conn_error(c, &st[j]);
            return i;
        }
        if (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "NOSCRIPT", 8)) {
            freeReplyObject(rep);
            again[i] = true;
            continue;
        }
        if (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "READONLY", 8)) *readonly = true;
        st[i].ok = take_reply(rep, &views[i], &st[i]) == 0;
    }
    return n;
}

int lease_batch(rconn_t *c, char *const *keys, const lease_req_t *reqs, int n, lease_view_t *views,
                lease_status_t *st)
{
    scripts_init();
    for (int i = 0; i < n; i++) st[i] = (lease_status_t){.ok = false};
    if (n == 0) return 0;
    if (rconn_ensure(c) < 0) {
        for (int i = 0; i < n; i++) conn_error(c, &st[i]);
        return -1;
    }
    for (int i = 0; i < n; i++) append_one(c, keys[i], &reqs[i]);
    bool *again = xcalloc((size_t)n, sizeof *again), readonly = false;
    int read = read_batch(c, n, views, st, again, &readonly);
    for (int j = 0; j < read && !readonly; j++)
        if (again[j]) st[j].ok = run_one(c, keys[j], &reqs[j], &views[j], &st[j]) == 0;
    free(again);
    /* a replica now (a failover): the next pass reconnects, to the new master */
    if (readonly) rconn_drop(c, "the lease script met a read-only replica");
    int good = 0;
    for (int j = 0; j < n; j++) good += st[j].ok;
    return read < n && !good ? -1 : good;
}

static int run_simple(rconn_t *c, const rscript_t *s, int argc, const char **argv, redisReply **out)
{
    if (rconn_ensure(c) < 0) return -1;
    if (rconn_script(c, s, 1, argc, argv, NULL, -1, -1, out) != RC_OK) return -1;
    if ((*out)->type == REDIS_REPLY_ERROR) {
        snprintf(c->last_error, sizeof c->last_error, "%s", (*out)->str);
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

int lease_orphan_renew(rconn_t *c, const char *key, const char *id, int budget, int64_t ttl_ms)
{
    scripts_init();
    if (rconn_ensure(c) < 0) return -1;
    lease_req_t r = {.id = id, .ttl_ms = ttl_ms, .budget = budget, .keep = 1};
    lease_view_t v = {0};
    int rv = run_one(c, key, &r, &v, NULL);
    lease_view_free(&v);
    return rv;
}

int lease_list(rconn_t *c, const char *key, lease_view_t *out)
{
    scripts_init();
    const char *argv[] = {key};
    redisReply *r = NULL;
    if (run_simple(c, &s_list, 1, argv, &r) < 0) return -1;
    if (take_reply(r, out, NULL) < 0) {
        snprintf(c->last_error, sizeof c->last_error, "a reply that is not the lease script's");
        return -1;
    }
    return 0;
}

/* A holder's id: printable ASCII, 1 to BUDGET_ID_MAX bytes. */
static bool id_ok(const redisReply *id)
{
    if (id->type != REDIS_REPLY_STRING || id->len == 0 || id->len > BUDGET_ID_MAX) return false;
    for (size_t i = 0; i < id->len; i++)
        if (id->str[i] < '!' || id->str[i] > '~') return false;
    return true;
}

/* The 7 numbers of a record, each at most its digits (the script's DIGITS). */
static int record_fields(const redisReply *rec, int64_t v[7])
{
    static const int digits[7] = {7, 7, 7, 16, 7, 16, 16};
    if (rec->type != REDIS_REPLY_STRING || rec->len > 100) return -1;
    const char *p = rec->str, *end = rec->str + rec->len;
    for (int i = 0; i < 7; i++) {
        int nd = 0;
        v[i] = 0;
        for (; p < end && *p >= '0' && *p <= '9'; p++, nd++) {
            if (nd == digits[i]) return -1;
            v[i] = v[i] * 10 + (*p - '0');
        }
        if (nd == 0) return -1;
        if (i < 6 && (p == end || *p++ != ',')) return -1;
    }
    return p == end ? 0 : -1;
}

/* "held,floor,want,pressure,budget,expiry,waiting_since", strictly (the
 * script's parse()): -1 for a record that is not qpool's or has lapsed. */
static int parse_record(const redisReply *id, const redisReply *rec, int64_t now, budget_host_t *h)
{
    int64_t v[7];
    if (!id_ok(id) || record_fields(rec, v) < 0) return -1;
    int64_t b = v[4];
    if (b < 1 || b > LEASE_BUDGET_MAX || v[1] > b || v[2] > b || v[0] > (b > LEASE_HELD_MAX ? b : LEASE_HELD_MAX) ||
        v[3] > ((int64_t)1 << 50) || v[5] <= now || v[5] > now + LEASE_EXPIRY_MAX_MS)
        return -1;
    memcpy(h->id, id->str, id->len);
    h->id[id->len] = '\0';
    h->held = (int)v[0];
    h->floor = (int)v[1];
    h->want = (int)v[2];
    h->pressure = v[3];
    h->budget = (int)b;
    h->expiry = v[5];
    h->waiting_since = v[6];
    return 0;
}

/* The numbers before the records: now, the budget in effect (-1: no
 * holder), the caller's held and prior (-1: a read). */
static int parse_head(const redisReply *r, lease_view_t *out)
{
    for (int i = 0; i < LEASE_HEAD; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER) return -1;
    long long now = r->element[0]->integer, budget = r->element[1]->integer, held = r->element[2]->integer,
              prior = r->element[3]->integer;
    if (now < 0 || budget < -1 || budget > LEASE_BUDGET_MAX || held < -1 || held > LEASE_BUDGET_MAX || prior < -1 ||
        prior > LEASE_BUDGET_MAX)
        return -1;
    out->now_ms = now;
    out->budget = (int)budget;
    out->held = (int)held;
    out->prior = (int)prior;
    return 0;
}

int lease_parse(const redisReply *r, lease_view_t *out)
{
    memset(out, 0, sizeof *out);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < LEASE_HEAD || (r->elements - LEASE_HEAD) % 2) return -1;
    size_t pairs = (r->elements - LEASE_HEAD) / 2;
    if (pairs > LEASE_MAX_HOLDERS || parse_head(r, out) < 0) return -1;
    out->hosts = xcalloc(pairs + 1, sizeof *out->hosts);
    for (size_t i = 0; i < pairs; i++) {
        const redisReply *id = r->element[LEASE_HEAD + 2 * i], *rec = r->element[LEASE_HEAD + 2 * i + 1];
        if (parse_record(id, rec, out->now_ms, &out->hosts[out->n]) == 0) out->n++;
    }
    return 0;
}

void lease_view_free(lease_view_t *v)
{
    free(v->hosts);
    memset(v, 0, sizeof *v);
}
