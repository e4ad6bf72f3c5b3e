/*
 * queue.c - see queue.h. The Lua scripts are qpool's own; their comments
 * say where they match Laravel's LuaScripts.php and where they deliberately
 * differ.
 */
#include "redis/queue.h"
#include "redis/rcluster.h"
#include "core/log.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS: per queue i (0-based) KEYS[5i+1..5i+5] = ready, delayed, reserved,
 *       notify, failed index; then KEYS[#KEYS] = set of queues with failures.
 * ARGV: now, reserve_until, migrate (0/1), batch, poison uuid, connection,
 *       failed limit, failed job key prefix, consume a notify token (0/1: 0
 *       when the caller already took one with BLPOP), then one unprefixed
 *       name per queue, then how many jobs to pop at most (prefetch), then
 *       1 when none of them starts now (a pop sent ahead: hold them all),
 *       then the pool and the host a poison payload's failed record names
 *       (each left out of the record when empty, as FAIL_LUA does).
 * Returns {kind, queue (1-based), a, b, full, next_due, extra, run}:
 *   kind 1: a = payload as stored (less a qpoolTwin marker, which the
 *           migrate step drops too), b = reserved copy (attempts + 1, cjson
 *           re-encoded exactly as Laravel's pop script does); extra = further
 *           jobs popped ahead, (queue, payload, held, reserved)*: a job
 *           popped ahead is held in :reserved with its attempts as they were
 *           (held), and becomes the reserved copy only when the worker
 *           starts it (CLAIM_LUA), so that a worker killed before it starts
 *           the job costs the job no attempt; both copies carry a
 *           "qpoolTwin" marker fresh to the pop, so neither can be a twin's
 *           member. With hold, the first job is held too: b is its held
 *           copy and run its reserved copy (else run is false). A poison
 *           payload met after the first job is put back at the head of its
 *           queue (with its token) and ends the batch: the next call takes it
 *           first. A reserved copy is always a unique member: a payload with
 *           neither uuid nor id, or one whose re-encoding is already in
 *           :reserved (a byte-identical twin in flight), gets a "qpoolTwin"
 *           key (fresh per pop), so an ack of one twin can never remove the
 *           other's reservation; an old marker is dropped before re-encoding;
 *   kind 2: a poison payload was moved to the failed store: a = uuid, b = why;
 *   kind 0: nothing to pop; next_due = earliest delayed/reserved score.
 * Every job or poison taken consumes one notify token, except the first when
 * the caller's BLPOP already did. */
/* Fields per job popped ahead in the pop reply's extra: queue, payload,
 * held copy, reserved copy. */
#define POP_EXTRA_FIELDS 4

static const char POP_LUA[] =
    "local nq = (#KEYS - 1) / 5\n"
    "local now = tonumber(ARGV[1])\n"
    "local full = 0\n"
    "local function trim(idx, limit, prefix)\n"
    "  local n = redis.call('zcard', idx)\n"
    "  if n > limit then\n"
    "    local old = redis.call('zrange', idx, 0, n - limit - 1)\n"
    "    for _, u in ipairs(old) do redis.call('del', prefix .. u) end\n"
    "    redis.call('zremrangebyrank', idx, 0, n - limit - 1)\n"
    "  end\n"
    "end\n"
    "-- a payload back from :reserved or :delayed loses qpool's qpoolTwin marker\n"
    "-- (a held or twin copy's): what the app, Laravel and the failed store see\n"
    "-- never carries it. nil when v has none.\n"
    "local function unmarked(v)\n"
    "  if not string.find(v, '\"qpoolTwin\"', 1, true) then return nil end\n"
    "  local ok, decoded = pcall(cjson.decode, v)\n"
    "  if not ok or type(decoded) ~= 'table' or decoded['qpoolTwin'] == nil then return nil end\n"
    "  decoded['qpoolTwin'] = nil\n"
    "  local okc, enc = pcall(cjson.encode, decoded)\n"
    "  if okc then return enc end\n"
    "  return nil\n"
    "end\n"
    "if ARGV[3] == '1' then\n"
    "  local batch = tonumber(ARGV[4])\n"
    "  local ones = {}\n"
    "  for i = 1, 100 do ones[i] = 1 end\n"
    "  for q = 0, nq - 1 do\n"
    "    local ready, notify = KEYS[q*5+1], KEYS[q*5+4]\n"
    "    for _, from in ipairs({KEYS[q*5+2], KEYS[q*5+3]}) do\n"
    "      local val = redis.call('zrangebyscore', from, '-inf', now, 'limit', 0, batch)\n"
    "      if #val > 0 then\n"
    "        redis.call('zremrangebyrank', from, 0, #val - 1)\n"
    "        for i = 1, #val do val[i] = unmarked(val[i]) or val[i] end\n"
    "        for i = 1, #val, 100 do\n"
    "          local j = math.min(i + 99, #val)\n"
    "          redis.call('rpush', ready, unpack(val, i, j))\n"
    "          redis.call('rpush', notify, unpack(ones, 1, j - i + 1))\n"
    "        end\n"
    "        if #val >= batch then full = 1 end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local function encode_attempts(decoded, n)\n"
    "  decoded['attempts'] = n\n"
    "  local okc, enc = pcall(cjson.encode, decoded)\n"
    "  if okc then return enc end\n"
    "  return nil, enc\n"
    "end\n"
    "local want = tonumber(ARGV[10 + nq]) or 1\n"
    "local hold = ARGV[11 + nq] == '1'\n"
    "local first, extra, took = nil, {}, 0\n"
    "for q = 0, nq - 1 do\n"
    "  while took < want do\n"
    "    local job = redis.call('lpop', KEYS[q*5+1])\n"
    "    if not job then break end\n"
    "    if took > 0 or ARGV[9] == '1' then redis.call('lpop', KEYS[q*5+4]) end\n"
    "    took = took + 1\n"
    "    local ok, decoded = pcall(cjson.decode, job)\n"
    "    local reason, reserved, a, held\n"
    "    if not ok or type(decoded) ~= 'table' then\n"
    "      reason = 'payload is not valid JSON'\n"
    "    else\n"
    "      a = tonumber(decoded['attempts'])\n"
    "      if a == nil then\n"
    "        reason = 'payload has no numeric \"attempts\"'\n"
    "      else\n"
    "        if decoded['qpoolTwin'] ~= nil then\n"
    "          -- moved back marked by Laravel's migrate: the job as handed on\n"
    "          -- (handler, failed store, give-back) carries no marker either\n"
    "          job = unmarked(job) or job\n"
    "          decoded['qpoolTwin'] = nil\n"
    "        end\n"
    "        local err\n"
    "        reserved, err = encode_attempts(decoded, a + 1)\n"
    "        if not reserved then reason = 'payload cannot be re-encoded: ' .. tostring(err) end\n"
    "      end\n"
    "    end\n"
    "    if reserved then\n"
    "      local rkey = KEYS[q*5+3]\n"
    "      if first or hold then\n"
    "        -- popped ahead: held with its attempts as they were until the\n"
    "        -- worker starts it; both copies carry a marker fresh to this pop,\n"
    "        -- so neither can ever be another job's member (a twin's)\n"
    "        decoded['qpoolTwin'] = ARGV[5] .. '-' .. took\n"
    "        reserved = encode_attempts(decoded, a + 1)\n"
    "        held = encode_attempts(decoded, a)\n"
    "        if not reserved or not held then reason = 'payload cannot be re-encoded'; reserved = nil end\n"
    "        if reserved then redis.call('zadd', rkey, ARGV[2], held) end\n"
    "      else\n"
    "        -- one :reserved member must stand for one job: a payload without\n"
    "        -- uuid or id (or a byte-identical twin of a job reserved now) gets\n"
    "        -- a marker that makes its reserved copy unique\n"
    "        local plain = type(decoded['uuid']) ~= 'string' and type(decoded['id']) ~= 'string'\n"
    "        if plain or redis.call('zadd', rkey, 'NX', ARGV[2], reserved) == 0 then\n"
    "          decoded['qpoolTwin'] = ARGV[5] .. '-' .. took\n"
    "          reserved = encode_attempts(decoded, a + 1)\n"
    "          if not reserved then reason = 'payload cannot be re-encoded' end\n"
    "          if reserved then redis.call('zadd', rkey, ARGV[2], reserved) end\n"
    "        end\n"
    "      end\n"
    "    end\n"
    "    if reserved then\n"
    "      if not first then first = {q + 1, job, held or reserved, held and reserved or false}\n"
    "      else\n"
    "        local n = #extra\n"
    "        extra[n + 1] = q + 1; extra[n + 2] = job; extra[n + 3] = held or reserved; extra[n + 4] = reserved\n"
    "      end\n"
    "    elseif first then\n"
    "      -- a poison payload after the first job: put it back and end the\n"
    "      -- batch; the next pop takes it first (and moves it aside)\n"
    "      redis.call('lpush', KEYS[q*5+1], job)\n"
    "      redis.call('rpush', KEYS[q*5+4], 1)\n"
    "      return {1, first[1], first[2], first[3], full, false, extra, first[4]}\n"
    "    else\n"
    "      local uuid = ARGV[5]\n"
    "      -- the payload's uuid names the record unless it is not plain text\n"
    "      -- (ASCII without controls: the record's key and the API carry it)\n"
    "      if ok and type(decoded) == 'table' and type(decoded['uuid']) == 'string'\n"
    "         and #decoded['uuid'] > 0 and #decoded['uuid'] <= 128\n"
    "         and not decoded['uuid']:find('[%z\\1-\\31\\127-\\255]') then uuid = decoded['uuid'] end\n"
    "      local jobkey = ARGV[8] ~= '' and ARGV[8] or (KEYS[q*5+5] .. ':job:')\n"
    "      redis.call('hset', jobkey .. uuid, 'uuid', uuid, 'connection', ARGV[6],\n"
    "        'queue', ARGV[10 + q], 'payload', job,\n"
    "        'exception', 'qpool: invalid payload: ' .. reason .. ' (the raw bytes are kept as they were popped)',\n"
    "        'failed_at', ARGV[1])\n"
    "      if ARGV[12 + nq] and ARGV[12 + nq] ~= '' then redis.call('hset', jobkey .. uuid, 'pool', ARGV[12 + nq]) end\n"
    "      if ARGV[13 + nq] and ARGV[13 + nq] ~= '' then redis.call('hset', jobkey .. uuid, 'host', ARGV[13 + nq]) end\n"
    "      redis.call('zadd', KEYS[q*5+5], now, uuid)\n"
    "      if ARGV[8] ~= '' then redis.call('sadd', KEYS[#KEYS], ARGV[10 + q]) end\n"
    "      trim(KEYS[q*5+5], tonumber(ARGV[7]), jobkey)\n"
    "      return {2, q + 1, uuid, reason, full}\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if first then return {1, first[1], first[2], first[3], full, false, extra, first[4]} end\n"
    "local due = false\n"
    "for q = 0, nq - 1 do\n"
    "  for _, k in ipairs({KEYS[q*5+2], KEYS[q*5+3]}) do\n"
    "    local f = redis.call('zrange', k, 0, 0, 'WITHSCORES')\n"
    "    if f[2] then\n"
    "      local s = tonumber(f[2])\n"
    "      if not due or s < due then due = s end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return {0, 0, false, false, full, due and string.format('%.0f', due) or false}";

/* Laravel's release, made idempotent: only re-add what was really removed.
 * ARGV[3] is what goes back: the reserved copy, stamped (payload.h), without
 * a qpoolTwin marker. Should a byte-identical twin already wait in :delayed
 * for the same moment, this copy gets a marker of its own (ARGV[4], fresh
 * per release), as the pop gives a twin's reserved copy one: one member must
 * stand for one job. */
static const char RELEASE_LUA[] =
    "if redis.call('zrem', KEYS[2], ARGV[1]) == 1 then\n"
    "  if redis.call('zadd', KEYS[1], 'NX', ARGV[2], ARGV[3]) == 0 then\n"
    "    local ok, decoded = pcall(cjson.decode, ARGV[3])\n"
    "    if ok and type(decoded) == 'table' then\n"
    "      decoded['qpoolTwin'] = ARGV[4]\n"
    "      local okc, enc = pcall(cjson.encode, decoded)\n"
    "      if okc then redis.call('zadd', KEYS[1], ARGV[2], enc) end\n"
    "    end\n"
    "  end\n"
    "  return 1\n"
    "end\n"
    "return 0";

/* Undo a pop that was never acted on (a prefetched job given back, a job
 * its handler never read): only if the reservation is still there, the
 * payload as it was before the pop goes back to the head of the queue, with
 * its token. KEYS[4] is this give-back's own token: a give-back resent after
 * a lost reply finds it and does nothing, so it can never remove the
 * reservation of a worker that popped the job since, nor push it twice. */
static const char UNPOP_LUA[] =
    "if redis.call('set', KEYS[4], '1', 'NX', 'EX', ARGV[3]) == false then return 0 end\n"
    "if redis.call('zrem', KEYS[2], ARGV[1]) == 1 then\n"
    "  redis.call('lpush', KEYS[1], ARGV[2])\n"
    "  redis.call('rpush', KEYS[3], 1)\n"
    "  return 1\n"
    "end\n"
    "return 0";

/* Start a job popped ahead: its held reservation (ARGV[1], attempts as they
 * were) becomes its reserved copy (ARGV[2], attempts + 1, as Laravel's pop
 * makes it) at the same expiry. 1 done, 2 done before (a claim resent), 0
 * the reservation is gone (it expired and another pop took it back, or the
 * job was claimed and its outcome written before this resend). */
static const char CLAIM_LUA[] =
    "if redis.call('zscore', KEYS[1], ARGV[2]) then return 2 end\n"
    "local s = redis.call('zscore', KEYS[1], ARGV[1])\n"
    "if not s then return 0 end\n"
    "redis.call('zrem', KEYS[1], ARGV[1])\n"
    "redis.call('zadd', KEYS[1], s, ARGV[2])\n"
    "return 1";

/* Renew a reservation only if it is still there: 1 renewed, 0 gone (it
 * expired and another worker's pop took it back, or it was never ours). */
static const char EXTEND_LUA[] =
    "if redis.call('zscore', KEYS[1], ARGV[2]) then\n"
    "  redis.call('zadd', KEYS[1], ARGV[1], ARGV[2])\n"
    "  return 1\n"
    "end\n"
    "return 0";

/* KEYS: reserved, failed index, failed queue set. ARGV: reserved member (may
 * be empty), uuid, connection, queue, payload, exception, failed_at, limit,
 * job key prefix, pool, host (each left out of the record when empty).
 * Returns 1 if the reservation was removed. */
static const char FAIL_LUA[] =
    "local removed = 0\n"
    "local jobkey = ARGV[9] ~= '' and ARGV[9] or (KEYS[2] .. ':job:')\n"
    "if ARGV[1] ~= '' then removed = redis.call('zrem', KEYS[1], ARGV[1]) end\n"
    "redis.call('hset', jobkey .. ARGV[2], 'uuid', ARGV[2], 'connection', ARGV[3], 'queue', ARGV[4],\n"
    "  'payload', ARGV[5], 'exception', ARGV[6], 'failed_at', ARGV[7])\n"
    "if ARGV[10] and ARGV[10] ~= '' then redis.call('hset', jobkey .. ARGV[2], 'pool', ARGV[10]) end\n"
    "if ARGV[11] and ARGV[11] ~= '' then redis.call('hset', jobkey .. ARGV[2], 'host', ARGV[11]) end\n"
    "redis.call('zadd', KEYS[2], ARGV[7], ARGV[2])\n"
    "if ARGV[9] ~= '' then redis.call('sadd', KEYS[3], ARGV[4]) end\n"
    "local n = redis.call('zcard', KEYS[2])\n"
    "local limit = tonumber(ARGV[8])\n"
    "if n > limit then\n"
    "  local old = redis.call('zrange', KEYS[2], 0, n - limit - 1)\n"
    "  for _, u in ipairs(old) do redis.call('del', jobkey .. u) end\n"
    "  redis.call('zremrangebyrank', KEYS[2], 0, n - limit - 1)\n"
    "end\n"
    "return removed";

/* Laravel's push script, same effect: the job and one notify token. */
static const char PUSH_LUA[] =
    "redis.call('rpush', KEYS[1], ARGV[1])\n"
    "redis.call('rpush', KEYS[2], 1)";

/* Worker::markJobAsFailedIfWillExceedMaxExceptions on a Redis cache store:
 * GET; SETEX 86400 0 when falsy; INCRBY 1; DEL when the max is reached. */
static const char MAXEXC_LUA[] =
    "local v = redis.call('get', KEYS[1])\n"
    "if not v or v == '0' or v == '' then redis.call('setex', KEYS[1], 86400, 0) end\n"
    "local n = redis.call('incrby', KEYS[1], 1)\n"
    "if tonumber(ARGV[1]) <= n then\n"
    "  redis.call('del', KEYS[1])\n"
    "  return {n, 1}\n"
    "end\n"
    "return {n, 0}";

rscript_t SCRIPT_POP, SCRIPT_RELEASE, SCRIPT_FAIL, SCRIPT_PUSH, SCRIPT_MAXEXC, SCRIPT_UNPOP, SCRIPT_EXTEND,
    SCRIPT_CLAIM, SCRIPT_POP_LIMITED, SCRIPT_POP_PICK;

/* s with the one occurrence of from replaced by to (aborts when from is
 * not there once: the limited pop is made from POP_LUA's text). */
static char *replace_once(char *s, const char *from, const char *to)
{
    char *at = strstr(s, from);
    if (!at || strstr(at + 1, from)) abort();
    char *out = xasprintf("%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    free(s);
    return out;
}

/* The limited pop: POP_LUA as it is, with the limits' look-ahead
 * (QLIMIT_PRE_LUA) before its loop, the loop skipping the queues whose
 * ready jobs all wait on a full limit, and an empty reply that says so
 * (and gives back the notify token the caller's BLPOP took). */
static const char *limited_pop_lua(void)
{
    static const char hold[] = "local hold = ARGV[11 + nq] == '1'\n";
    static const char empty[] = "return {0, 0, false, false, full, due and string.format('%.0f', due) or false}";
    char *s = xstrdup(POP_LUA);
    char *pre = xasprintf("%s%s", hold, QLIMIT_PRE_LUA);
    s = replace_once(s, hold, pre);
    free(pre);
    s = replace_once(s, "  while took < want do\n", "  while took < want and not lim_skip[q] do\n");
    s = replace_once(s, "if first then return {1, first[1], first[2], first[3], full, false, extra, first[4]} end\n",
                     "if first then return {1, first[1], first[2], first[3], full, false, extra, first[4], lim_keys} end\n");
    return replace_once(s, empty,
                        "if lim_blocked and ARGV[9] == '0' then lim_token_back() end\n"
                        "return {0, 0, false, false, full, due and string.format('%.0f', due) or false, "
                        "lim_blocked and 1 or 0, lim_blocked and lim_promise() or -1}");
}

/* The pick pop (a Redis Cluster with limits, pop_args_t.pick): POP_LUA as
 * it is, told one job and no more (no hold). ARGV[14 + nq] is how far to
 * look (ready jobs from the head), the candidate payloads follow, in queue
 * order: the first of them still among the first `look` jobs of the one
 * queue it is given goes to the head (LREM of its first copy, LPUSH), so
 * that the loop pops exactly it. None there: {0, 0, false, false, full,
 * false, 2} (gone), nothing else done after the migration. No candidates:
 * nothing popped (want 0: the migration and the next due time). */
static const char *pick_pop_lua(void)
{
    static const char hold[] = "local hold = ARGV[11 + nq] == '1'\n";
    char *s = xstrdup(POP_LUA);
    return replace_once(s, hold,
                        "local hold = false\n"
                        "want = 1\n"
                        "local look, first = tonumber(ARGV[14 + nq]), ARGV[15 + nq]\n"
                        "if not look or not first then want = 0\n"
                        "else\n"
                        "  local head, at, pick = redis.call('lindex', KEYS[1], 0), {}, nil\n"
                        "  for k = 15 + nq, #ARGV do\n"
                        "    if ARGV[k] == head then at[head] = 1; pick = head; break end\n"
                        "  end\n"
                        "  if not pick then\n"
                        "    for i, v in ipairs(redis.call('lrange', KEYS[1], 0, look - 1)) do\n"
                        "      if not at[v] then at[v] = i end\n"
                        "    end\n"
                        "    for k = 15 + nq, #ARGV do\n"
                        "      if at[ARGV[k]] then pick = ARGV[k]; break end\n"
                        "    end\n"
                        "  end\n"
                        "  if not pick then return {0, 0, false, false, full, false, 2} end\n"
                        "  if at[pick] > 1 then\n"
                        "    redis.call('lrem', KEYS[1], 1, pick)\n"
                        "    redis.call('lpush', KEYS[1], pick)\n"
                        "  end\n"
                        "end\n");
}

void queue_scripts_init(void)
{
    static bool done;
    if (done) return;
    rscript_init(&SCRIPT_POP, POP_LUA);
    rscript_init(&SCRIPT_RELEASE, RELEASE_LUA);
    rscript_init(&SCRIPT_FAIL, FAIL_LUA);
    rscript_init(&SCRIPT_PUSH, PUSH_LUA);
    rscript_init(&SCRIPT_MAXEXC, MAXEXC_LUA);
    rscript_init(&SCRIPT_UNPOP, UNPOP_LUA);
    rscript_init(&SCRIPT_EXTEND, EXTEND_LUA);
    rscript_init(&SCRIPT_CLAIM, CLAIM_LUA);
    rscript_init(&SCRIPT_POP_LIMITED, limited_pop_lua()); /* lives as long as the process */
    rscript_init(&SCRIPT_POP_PICK, pick_pop_lua());       /* the same */
    done = true;
}

static int load_scripts(rconn_t *c, const rscript_t *const *all, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", all[i]->body};
        rconn_append(c, 3, argv, NULL);
    }
    int ok = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *r;
        if (rconn_read(c, -1, -1, &r) != RC_OK) return -1;
        if (r->type == REDIS_REPLY_ERROR) {
            log_error("SCRIPT LOAD failed: %s", r->str);
            ok = -1;
        } else if (r->type == REDIS_REPLY_STRING && strcmp(r->str, all[i]->sha) != 0) {
            log_error("SCRIPT LOAD returned sha %s, expected %s", r->str, all[i]->sha);
            ok = -1;
        }
        freeReplyObject(r);
    }
    return ok;
}

int queue_load_scripts(rconn_t *c)
{
    queue_scripts_init();
    if (rconn_is_cluster(c)) return 0; /* rconn_cluster loads every registered script on each node */
    const rscript_t *const all[] = {&SCRIPT_POP, &SCRIPT_RELEASE, &SCRIPT_FAIL, &SCRIPT_PUSH, &SCRIPT_MAXEXC,
                                    &SCRIPT_UNPOP, &SCRIPT_EXTEND, &SCRIPT_CLAIM};
    return load_scripts(c, all, ARRAY_LEN(all));
}

int queue_load_limited(rconn_t *c)
{
    queue_scripts_init();
    if (rconn_is_cluster(c)) return 0; /* rconn_cluster loads every registered script on each node */
    const rscript_t *const all[] = {&SCRIPT_POP_LIMITED};
    return load_scripts(c, all, ARRAY_LEN(all));
}

void qkeys_init(qkeys_t *k, const char *prefix, const char *name)
{
    k->name = xstrdup(name);
    k->ready = xasprintf("%squeues:%s", prefix, name);
    k->delayed = xasprintf("%s:delayed", k->ready);
    k->reserved = xasprintf("%s:reserved", k->ready);
    k->notify = xasprintf("%s:notify", k->ready);
    k->failed = xasprintf("%sqpool:failed:%s", prefix, name);
    k->unpop = xasprintf("%sqpool:unpop:%s:", prefix, name);
    k->slot = rcluster_key_slot(k->ready, strlen(k->ready));
}

void qkeys_free(qkeys_t *k)
{
    FREE_ALL(k->name, k->unpop, k->ready, k->delayed, k->reserved, k->notify, k->failed);
}

void queue_set_init(queue_set_t *qs, const char *prefix, char *const *names, int n)
{
    qs->prefix = xstrdup(prefix);
    qs->nq = n;
    qs->q = xcalloc((size_t)n, sizeof *qs->q);
    for (int i = 0; i < n; i++) qkeys_init(&qs->q[i], prefix, names[i]);
    qs->failed_queues = xasprintf("%sqpool:failed:queues", prefix);
    qs->failed_job_prefix = xasprintf("%sqpool:failed:job:", prefix);
}

void queue_set_free(queue_set_t *qs)
{
    for (int i = 0; i < qs->nq; i++) qkeys_free(&qs->q[i]);
    FREE_ALL(qs->q, qs->prefix, qs->failed_queues, qs->failed_job_prefix);
    memset(qs, 0, sizeof *qs);
}

/* ------------------------------------------------------------ pop */

/* The pop script over the queues not in skip (in order). */
static bool append_pop_masked(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, uint32_t skip)
{
    int idx[QPOOL_MAX_QUEUES];
    int n = 0;
    for (int i = 0; i < qs->nq && n < QPOOL_MAX_QUEUES; i++)
        if (!(skip & (1u << i))) idx[n++] = i;
    if (n == 0) return false;
    bool cl = rconn_is_cluster(c);
    bool lim = a->limits && a->limits->n > 0 && !cl, pick = cl && a->pick;
    int nkeys = 5 * n + 1;
    int npick = pick && a->npicks > 0 ? 1 + a->npicks : 0;
    int argc = nkeys + 9 + n + 4 + (lim ? qlimits_argc(a->limits) + 2 : 0) + npick;
    const char **argv = xcalloc((size_t)argc, sizeof *argv);
    int o = 0;
    for (int j = 0; j < n; j++) {
        const qkeys_t *k = &qs->q[idx[j]];
        argv[o++] = k->ready;
        argv[o++] = k->delayed;
        argv[o++] = k->reserved;
        argv[o++] = k->notify;
        argv[o++] = k->failed;
    }
    /* on a cluster: a key of the same slot in its place (not used), and no
     * job key prefix: records go to <failed index>:job:<uuid> */
    argv[o++] = cl ? qs->q[idx[0]].failed : qs->failed_queues;
    char now[24], until[24], batch[16], limit[16], uuid[37];
    snprintf(now, sizeof now, "%lld", (long long)a->now);
    snprintf(until, sizeof until, "%lld", (long long)(a->now + a->retry_after));
    snprintf(batch, sizeof batch, "%d", a->batch > 0 ? a->batch : 100);
    snprintf(limit, sizeof limit, "%d", a->failed_limit > 0 ? a->failed_limit : 10000);
    uuid4(uuid);
    argv[o++] = now;
    argv[o++] = until;
    argv[o++] = a->migrate ? "1" : "0";
    argv[o++] = batch;
    argv[o++] = uuid;
    argv[o++] = a->connection;
    argv[o++] = limit;
    argv[o++] = cl ? "" : qs->failed_job_prefix;
    argv[o++] = a->token_taken ? "0" : "1";
    for (int j = 0; j < n; j++) argv[o++] = qs->q[idx[j]].name;
    char want[16];
    snprintf(want, sizeof want, "%d", a->want > 1 ? a->want : 1);
    argv[o++] = want;
    argv[o++] = a->hold ? "1" : "0";
    argv[o++] = a->pool ? a->pool : "";
    argv[o++] = a->host ? a->host : "";
    char tq[16] = "0"; /* after the limits: where the BLPOP's token came from (1-based here) */
    for (int j = 0; lim && j < n; j++)
        if (a->token_q == idx[j] + 1) snprintf(tq, sizeof tq, "%d", j + 1);
    if (lim) {
        qlimits_fill_argv(a->limits, a->slot_token, argv + o);
        argv[o + qlimits_argc(a->limits)] = tq;
        argv[o + qlimits_argc(a->limits) + 1] = a->promised ? "1" : "0";
    }
    size_t *lens = NULL;
    char look[16];
    if (npick) { /* the payloads are binary-safe: every length given */
        snprintf(look, sizeof look, "%d", QLIMIT_LOOKAHEAD);
        argv[o++] = look;
        lens = xcalloc((size_t)argc, sizeof *lens);
        for (int i = 0; i < o; i++) lens[i] = strlen(argv[i]);
        for (int i = 0; i < a->npicks; i++) {
            argv[o + i] = a->picks[i];
            lens[o + i] = a->picklens[i];
        }
    }
    rconn_append_script(c, lim ? &SCRIPT_POP_LIMITED : pick ? &SCRIPT_POP_PICK : &SCRIPT_POP, nkeys, argc, argv, lens);
    FREE_ALL(argv, lens);
    return true;
}

/* On a cluster: the skip mask of the g-th run of same-slot queues among
 * those not skipped (every queue outside the run skipped), or ~0u when there
 * is no such run. */
static uint32_t group_mask(const queue_set_t *qs, uint32_t skip, int g)
{
    int idx[QPOOL_MAX_QUEUES] = {0}, slots[QPOOL_MAX_QUEUES] = {0}, group[QPOOL_MAX_QUEUES] = {0};
    int n = 0;
    for (int i = 0; i < qs->nq && n < QPOOL_MAX_QUEUES; i++)
        if (!(skip & (1u << i))) {
            idx[n] = i;
            slots[n++] = qs->q[i].slot;
        }
    rcluster_group_runs(slots, n, group);
    uint32_t keep = 0;
    for (int j = 0; j < n; j++)
        if (group[j] == g) keep |= 1u << idx[j];
    return keep ? ~keep : ~0u;
}

bool queue_append_pop(rconn_t *c, const queue_set_t *qs, const pop_args_t *a)
{
    if (!rconn_is_cluster(c)) return append_pop_masked(c, qs, a, a->skip_mask);
    /* one slot per script: the first run now, the next ones by queue_read_pop */
    return append_pop_masked(c, qs, a, group_mask(qs, a->skip_mask, 0));
}

/* The number the script gave a queue under mask from, as it would be
 * under mask to (both count the queues not skipped, from 1). */
static long long renumber(const queue_set_t *qs, uint32_t from, uint32_t to, long long n)
{
    for (int i = 0, seen = 0, at = 0; i < qs->nq; i++) {
        if (!(to & (1u << i))) at++;
        if (from & (1u << i)) continue;
        if (++seen == n) return at;
    }
    return 0;
}

static void renumber_reply(const queue_set_t *qs, uint32_t from, uint32_t to, redisReply *r)
{
    r->element[1]->integer = renumber(qs, from, to, r->element[1]->integer);
    if (r->elements < 7 || r->element[6]->type != REDIS_REPLY_ARRAY) return;
    redisReply *x = r->element[6];
    for (size_t i = 0; i + POP_EXTRA_FIELDS - 1 < x->elements; i += POP_EXTRA_FIELDS)
        if (x->element[i]->type == REDIS_REPLY_INTEGER) x->element[i]->integer = renumber(qs, from, to, x->element[i]->integer);
}

static bool is_pop_reply(const redisReply *r)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements >= 5 && r->element[0]->type == REDIS_REPLY_INTEGER &&
           r->element[1]->type == REDIS_REPLY_INTEGER && r->element[4]->type == REDIS_REPLY_INTEGER;
}

/* Two empty replies as one: the earlier due time, "full" if either was. */
static redisReply *merge_empty(redisReply *best, redisReply *r)
{
    if (!best) return r;
    bool rdue = r->elements >= 6 && r->element[5]->type == REDIS_REPLY_STRING;
    bool bdue = best->elements >= 6 && best->element[5]->type == REDIS_REPLY_STRING;
    long long full = best->element[4]->integer || r->element[4]->integer;
    if (rdue && (!bdue || strtoll(r->element[5]->str, NULL, 10) < strtoll(best->element[5]->str, NULL, 10))) {
        freeReplyObject(best);
        best = r;
    } else
        freeReplyObject(r);
    best->element[4]->integer = full;
    return best;
}

int queue_read_pop(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, redisReply **out)
{
    if (!rconn_is_cluster(c)) return rconn_read(c, -1, -1, out);
    redisReply *best = NULL;
    for (int g = 0;; g++) {
        uint32_t mask = group_mask(qs, a->skip_mask, g);
        redisReply *r;
        int rv = rconn_read(c, -1, -1, &r);
        if (rv != RC_OK || !is_pop_reply(r) || r->element[0]->integer != POP_EMPTY) {
            if (best) freeReplyObject(best);
            if (rv == RC_OK && is_pop_reply(r)) renumber_reply(qs, mask, a->skip_mask, r);
            *out = r;
            return rv;
        }
        best = merge_empty(best, r);
        uint32_t next = group_mask(qs, a->skip_mask, g + 1);
        if (next == ~0u || !append_pop_masked(c, qs, a, next)) {
            *out = best;
            return RC_OK;
        }
    }
}

static char *elem_dup(const redisReply *e, size_t *len)
{
    if (!e || e->type != REDIS_REPLY_STRING) return NULL;
    if (len) *len = e->len;
    return xstrndup(e->str, e->len);
}

/* The script numbers (from 1) only the queues it was given: map back
 * through the skip mask. -1 for a number that names none of them. */
static int map_queue(const queue_set_t *qs, const pop_args_t *a, long long n)
{
    if (n < 1 || n > qs->nq) return -1;
    long long nth = n - 1;
    for (int i = 0, seen = 0; i < qs->nq; i++) {
        if (a->skip_mask & (1u << i)) continue;
        if (seen++ == nth) return i;
    }
    return -1;
}

/* The limited pop's per-key :run sets the job took (qlimit.c, lim_keys). */
static void parse_lim_keys(const redisReply *x, pop_result_t *out)
{
    if (x->type != REDIS_REPLY_ARRAY || !x->elements) return;
    size_t n = x->elements < POP_LIM_KEYS_MAX ? x->elements : POP_LIM_KEYS_MAX;
    out->lim_keys = xcalloc(n, sizeof *out->lim_keys);
    for (size_t i = 0; i < n; i++)
        if (x->element[i]->type == REDIS_REPLY_STRING) out->lim_keys[out->nlim_keys++] = elem_dup(x->element[i], NULL);
}

bool queue_parse_pop(const queue_set_t *qs, const pop_args_t *a, redisReply *r, pop_result_t *out)
{
    memset(out, 0, sizeof *out);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 5 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER)
        return false;
    long long kind = r->element[0]->integer;
    if (kind != POP_EMPTY && kind != POP_JOB && kind != POP_POISON) return false;
    out->kind = (enum pop_kind)kind;
    out->qidx = map_queue(qs, a, r->element[1]->integer);
    out->migrate_full = r->element[4]->type == REDIS_REPLY_INTEGER && r->element[4]->integer;
    if (out->kind == POP_JOB) {
        out->raw = elem_dup(r->element[2], &out->rawlen);
        out->reserved = elem_dup(r->element[3], &out->reslen);
        if (r->elements >= 8 && r->element[7]->type == REDIS_REPLY_STRING)
            out->run = elem_dup(r->element[7], &out->runlen);
        if (!out->raw || !out->reserved || out->qidx < 0 || (a->hold && !out->run)) {
            pop_result_free(out);
            return false;
        }
        if (r->elements >= 9) parse_lim_keys(r->element[8], out);
        if (r->elements >= 7 && r->element[6]->type == REDIS_REPLY_ARRAY &&
            r->element[6]->elements >= POP_EXTRA_FIELDS) {
            const redisReply *x = r->element[6];
            out->extra = xcalloc(x->elements / POP_EXTRA_FIELDS, sizeof *out->extra);
            for (size_t i = 0; i + POP_EXTRA_FIELDS - 1 < x->elements; i += POP_EXTRA_FIELDS) {
                pop_item_t *it = &out->extra[out->nextra];
                it->qidx = x->element[i]->type == REDIS_REPLY_INTEGER ? map_queue(qs, a, x->element[i]->integer) : -1;
                it->raw = elem_dup(x->element[i + 1], &it->rawlen);
                it->reserved = elem_dup(x->element[i + 2], &it->reslen);
                it->run = elem_dup(x->element[i + 3], &it->runlen);
                out->nextra++;
                if (it->qidx < 0 || !it->raw || !it->reserved || !it->run) {
                    pop_result_free(out);
                    return false;
                }
            }
        }
    } else if (out->kind == POP_POISON) {
        out->uuid = elem_dup(r->element[2], NULL);
        out->reason = elem_dup(r->element[3], NULL);
        if (out->qidx < 0) { /* callers index the queue set with it */
            pop_result_free(out);
            return false;
        }
    } else {
        if (r->elements >= 6 && r->element[5]->type == REDIS_REPLY_STRING) {
            out->has_next_due = true;
            out->next_due = strtoll(r->element[5]->str, NULL, 10);
        }
        out->limit_blocked = r->elements >= 7 && r->element[6]->type == REDIS_REPLY_INTEGER && r->element[6]->integer;
        out->has_limit_wake = out->limit_blocked && r->elements >= 8 && r->element[7]->type == REDIS_REPLY_INTEGER &&
                              r->element[7]->integer >= 0;
        if (out->has_limit_wake) out->limit_wake_ms = r->element[7]->integer;
        out->pick_gone = out->limit_blocked && r->element[6]->integer == 2;
        if (out->pick_gone) out->limit_blocked = false;
    }
    return true;
}

void pop_item_free(pop_item_t *it)
{
    FREE_ALL(it->raw, it->reserved, it->run);
    memset(it, 0, sizeof *it);
}

void pop_result_free(pop_result_t *r)
{
    for (int i = 0; i < r->nextra; i++) pop_item_free(&r->extra[i]);
    for (int i = 0; i < r->nlim_keys; i++) free(r->lim_keys[i]);
    FREE_ALL(r->extra, r->raw, r->reserved, r->run, r->uuid, r->reason, r->lim_keys);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ outcomes */

void queue_append_unpop(rconn_t *c, const qkeys_t *k, const char *reserved, size_t reslen,
                        const char *raw, size_t rawlen, const char *token)
{
    char *tok = xasprintf("%s%s", k->unpop, token);
    const char *argv[] = {k->ready, k->reserved, k->notify, tok, reserved, raw, QPOOL_UNPOP_TOKEN_TTL};
    size_t lens[] = {strlen(k->ready), strlen(k->reserved), strlen(k->notify), strlen(tok), reslen, rawlen,
                     strlen(QPOOL_UNPOP_TOKEN_TTL)};
    rconn_append_script(c, &SCRIPT_UNPOP, 4, 7, argv, lens);
    free(tok);
}

void queue_append_claim(rconn_t *c, const qkeys_t *k, const char *held, size_t heldlen, const char *reserved,
                        size_t reslen)
{
    const char *argv[] = {k->reserved, held, reserved};
    size_t lens[] = {strlen(k->reserved), heldlen, reslen};
    rconn_append_script(c, &SCRIPT_CLAIM, 1, 3, argv, lens);
}

void queue_append_ack(rconn_t *c, const qkeys_t *k, const char *reserved, size_t len)
{
    const char *argv[] = {"ZREM", k->reserved, reserved};
    size_t lens[] = {4, strlen(k->reserved), len};
    rconn_append(c, 3, argv, lens);
}

void queue_append_release(rconn_t *c, const qkeys_t *k, const char *reserved, size_t len, const char *payload,
                          size_t plen, const char *marker, int64_t available_at)
{
    char at[24];
    snprintf(at, sizeof at, "%lld", (long long)available_at);
    const char *argv[] = {k->delayed, k->reserved, reserved, at, payload, marker};
    size_t lens[] = {strlen(k->delayed), strlen(k->reserved), len, strlen(at), plen, strlen(marker)};
    rconn_append_script(c, &SCRIPT_RELEASE, 2, 6, argv, lens);
}

void queue_append_extend(rconn_t *c, const qkeys_t *k, const char *reserved, size_t len,
                         int64_t until)
{
    char at[24];
    snprintf(at, sizeof at, "%lld", (long long)until);
    const char *argv[] = {k->reserved, at, reserved};
    size_t lens[] = {strlen(k->reserved), strlen(at), len};
    rconn_append_script(c, &SCRIPT_EXTEND, 1, 3, argv, lens);
}

void queue_append_fail(rconn_t *c, const queue_set_t *qs, const qkeys_t *k, const char *reserved,
                       size_t reslen, const fail_record_t *f)
{
    char at[24], limit[16];
    snprintf(at, sizeof at, "%lld", (long long)f->failed_at);
    snprintf(limit, sizeof limit, "%d", f->limit > 0 ? f->limit : 10000);
    /* On a cluster every key is the queue's slot: the record is
     * <failed index>:job:<uuid> and the set of queues is not kept (failed.c). */
    bool cl = rconn_is_cluster(c);
    const char *argv[] = {k->reserved, k->failed, cl ? k->failed : qs->failed_queues, reserved ? reserved : "",
                          f->uuid, f->connection, k->name, f->payload, f->exception, at, limit,
                          cl ? "" : qs->failed_job_prefix, f->pool ? f->pool : "", f->host ? f->host : ""};
    size_t lens[14];
    for (int i = 0; i < 14; i++) lens[i] = strlen(argv[i]);
    lens[3] = reserved ? reslen : 0;
    lens[7] = f->payload_len;
    rconn_append_script(c, &SCRIPT_FAIL, 3, 14, argv, lens);
}

/* ------------------------------------------------------------ producer */

void queue_append_push(rconn_t *c, const qkeys_t *k, const char *payload, size_t len)
{
    const char *argv[] = {k->ready, k->notify, payload};
    size_t lens[] = {strlen(k->ready), strlen(k->notify), len};
    rconn_append_script(c, &SCRIPT_PUSH, 2, 3, argv, lens);
}

void queue_append_later(rconn_t *c, const qkeys_t *k, const char *payload, size_t len, int64_t at)
{
    char score[24];
    snprintf(score, sizeof score, "%lld", (long long)at);
    const char *argv[] = {"ZADD", k->delayed, score, payload};
    size_t lens[] = {4, strlen(k->delayed), strlen(score), len};
    rconn_append(c, 4, argv, lens);
}

long queue_count_exception(rconn_t *cache, const char *key, long max, bool *reached)
{
    char m[24];
    snprintf(m, sizeof m, "%ld", max);
    const char *argv[] = {key, m};
    redisReply *r;
    *reached = false;
    if (rconn_script(cache, &SCRIPT_MAXEXC, 1, 2, argv, NULL, -1, -1, &r) != RC_OK) return -1;
    long n = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        n = (long)r->element[0]->integer;
        *reached = r->element[1]->integer != 0;
    } else if (r->type == REDIS_REPLY_ERROR)
        log_error("maxExceptions counter %s: %s", key, r->str);
    freeReplyObject(r);
    return n;
}

void queue_append_counts(rconn_t *c, const qkeys_t *k)
{
    const char *a1[] = {"LLEN", k->ready}, *a2[] = {"ZCARD", k->delayed}, *a3[] = {"ZCARD", k->reserved};
    rconn_append(c, 2, a1, NULL);
    rconn_append(c, 2, a2, NULL);
    rconn_append(c, 2, a3, NULL);
}
