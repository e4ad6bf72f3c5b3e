/*
 * qlimit.c - see qlimit.h.
 */
#include "redis/qlimit.h"
#include "redis/qlimit_tags.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-key limits (a limit with a tag_prefix): the keys a job falls under
 * are its tags that start with the prefix, less the prefix. The tags come
 * from the payload: its "tags" array (Horizon's, at dispatch) when it has
 * one, else Horizon's model tags (Class:id) of the ModelIdentifiers in the
 * serialized command (data.command). Bounded: the first LIM_TAGS tags, the
 * first 8 models, LIM_KEYS keys per limit and job; a key longer than
 * LIM_KEY_LEN bytes or with a byte outside [A-Za-z0-9_.@-] is
 * "h:<sha1 of it>". A key's own state is <key>:k:<kid>:run / :bucket,
 * lapsing as the limit's; a job holding a key's slot also holds one in the
 * limit's own :run (what status counts as in use). lim_keys: every :run set
 * the pop took a slot in (its reply names them: the worker renews and gives
 * back exactly those, never a guess of its own from the class it reads).
 * The same rules in C: qlimit_tags.c (a change here is a change there). */
/* A bucket refilled to v (rate in jobs per ms), shared by the pop, the
 * Cluster lease scripts, the refund and the status read. A worker that came
 * back for a full bucket late keeps up to lim_late of a token of its
 * lateness (with burst = 1 that lateness was lost on every token: 5-10 % of
 * the rate); two tokens' time without a pop is a quiet spell: the burst.
 * Why a 1 s window still holds at most floor(rate + burst) starts (r the
 * rate per second, R = floor(r), f = r - R, burst whole): the window's first
 * start sees at most burst + late; each start takes 1 and less than 1 s
 * refills less than r, so k starts need k <= burst + late + r x d with
 * d < 1 s. With late = max(0, min(0.5, 1 - f - 0.001)): late + r x d <
 * R + late + f <= R + 0.999 when late > 0, and r x d < R + 1 when late = 0,
 * so k <= R + burst = floor(r + burst) (0.001: room for float error). A
 * fixed 0.5 did not: 2.6/s burst 1 allowed 4 starts in a window, 40/m 2
 * where 1.67 is the bound. */
#define QLIMIT_REFILL_LUA \
    "local function lim_late(rate)\n" \
    "  local r = rate * 1000\n" \
    "  local f = math.max(0, r - math.floor(r + 1e-9))\n" \
    "  return math.max(0, math.min(0.5, 1 - f - 0.001))\n" \
    "end\n" \
    "local function lim_refill(v, burst, rate)\n" \
    "  if v >= burst + 2 then return burst end\n" \
    "  return math.min(v, burst + lim_late(rate))\n" \
    "end\n"

#define QLIMIT_TAGS_LUA \
    "local LIM_TAGS, LIM_KEYS, LIM_KEY_LEN = 50, 4, 64\n" \
    "local lim_keys = {}\n" \
    "local function lim_pstr(s, at) -- PHP's s:N:\"...\"; at an 's'\n" \
    "  local n, q = string.match(s, '^s:(%d+):\"()', at)\n" \
    "  n = tonumber(n)\n" \
    "  if not n or n > 4096 or string.sub(s, q + n, q + n + 1) ~= '\";' then return nil end\n" \
    "  return string.sub(s, q, q + n - 1), q + n + 2\n" \
    "end\n" \
    "local function lim_pscalar(s, at) -- an int or a string\n" \
    "  local i, e = string.match(s, '^i:(%-?%d+);()', at)\n" \
    "  if i then return i, e end\n" \
    "  return lim_pstr(s, at)\n" \
    "end\n" \
    "local function lim_pids(s, at, cls, out) -- an id, or an array of them (a collection)\n" \
    "  local id = lim_pscalar(s, at)\n" \
    "  if id then out[#out + 1] = cls .. ':' .. id; return end\n" \
    "  local n, p = string.match(s, '^a:(%d+):{()', at)\n" \
    "  for _ = 1, math.min(tonumber(n) or 0, LIM_TAGS) do\n" \
    "    local _, p2 = lim_pscalar(s, p)\n" \
    "    if not p2 then return end\n" \
    "    id, p = lim_pscalar(s, p2)\n" \
    "    if not id or #out >= LIM_TAGS then return end\n" \
    "    out[#out + 1] = cls .. ':' .. id\n" \
    "  end\n" \
    "end\n" \
    "local function lim_models(cmd, out)\n" \
    "  local mark, from = '\"Illuminate\\\\Contracts\\\\Database\\\\ModelIdentifier\":', 1\n" \
    "  for _ = 1, 8 do\n" \
    "    local a, b = string.find(cmd, mark, from, true)\n" \
    "    if not a then return end\n" \
    "    from = b + 1\n" \
    "    local p = string.match(cmd, '^%d+:{()', from)\n" \
    "    if p and string.sub(cmd, p, p + 11) == 's:5:\"class\";' then\n" \
    "      local cls, p2 = lim_pstr(cmd, p + 12)\n" \
    "      if cls and string.sub(cmd, p2, p2 + 8) == 's:2:\"id\";' then lim_pids(cmd, p2 + 9, cls, out) end\n" \
    "    end\n" \
    "  end\n" \
    "end\n" \
    "local function lim_job_tags(d)\n" \
    "  local out = {}\n" \
    "  if type(d['tags']) == 'table' and #d['tags'] > 0 then\n" \
    "    for i = 1, math.min(#d['tags'], LIM_TAGS) do\n" \
    "      if type(d['tags'][i]) == 'string' then out[#out + 1] = d['tags'][i] end\n" \
    "    end\n" \
    "  elseif type(d['data']) == 'table' and type(d['data']['command']) == 'string' then\n" \
    "    lim_models(d['data']['command'], out)\n" \
    "  end\n" \
    "  return out\n" \
    "end\n" \
    "local function lim_kid(tag, tp)\n" \
    "  if #tag <= #tp or string.sub(tag, 1, #tp) ~= tp then return nil end\n" \
    "  local k = string.sub(tag, #tp + 1)\n" \
    "  if #k > LIM_KEY_LEN or string.find(k, '[^%w_.@-]') then k = 'h:' .. redis.sha1hex(k) end\n" \
    "  return k\n" \
    "end\n" \
    "local lim_tags_of, lim_tags = nil, nil\n" \
    "-- a per-key limit l on the job d: true when one of its keys is full, else\n" \
    "-- the keys (and the limit's own count) join hit; no key: not limited by l\n" \
    "local function lim_tagged(l, d, hit)\n" \
    "  if lim_tags_of ~= d then\n" \
    "    local ok, t = pcall(lim_job_tags, d) -- hostile bytes never fail the pop\n" \
    "    lim_tags_of, lim_tags = d, ok and t or {}\n" \
    "  end\n" \
    "  l.subs = l.subs or {}\n" \
    "  local mine, seen = {}, {}\n" \
    "  for _, t in ipairs(lim_tags) do\n" \
    "    local k = #mine < LIM_KEYS and lim_kid(t, l.tp)\n" \
    "    if k and not seen[k] then\n" \
    "      seen[k] = true\n" \
    "      l.subs[k] = l.subs[k] or {key = l.key .. ':k:' .. k, conc = l.conc, rate = l.rate, burst = l.burst, tagged = true}\n" \
    "      if lim_full(l.subs[k]) then l.last_full = l.subs[k]; return true end\n" \
    "      mine[#mine + 1] = l.subs[k]\n" \
    "    end\n" \
    "  end\n" \
    "  if #mine == 0 then return false end\n" \
    "  if l.conc > 0 then\n" \
    "    l.all = l.all or {key = l.key, conc = l.conc, rate = 0, burst = 1, tagged = true}\n" \
    "    lim_used(l.all) -- drops lapsed members\n" \
    "    mine[#mine + 1] = l.all\n" \
    "  end\n" \
    "  for _, m in ipairs(mine) do hit[#hit + 1] = m end\n" \
    "  return false\n" \
    "end\n"

/* The held-prefix record of a queue (issue 33: B behind more held A jobs
 * than the look-ahead): <prefix>qpool:held:<queue>, a hash of the head
 * payload's sha1 (h), how many jobs from the head are known held (n), and
 * per limit (or per-key sub) that held some, L:<its key> = how many. Only
 * pops change a queue's head (pushes and migrations append at the tail; a
 * pick moves a job from after the prefix to the head and pops it at once),
 * so while the head is the recorded one and every recorded limit is still
 * full, every job of the prefix is still held: the look-ahead starts after
 * it and extends it. Any doubt (another head, a recorded limit with room,
 * a limit this pop does not know) means a scan from the head. A job
 * removed from inside the prefix by someone else costs order (one job
 * looked at later), never a limit: a job is started only after its own
 * check. The record lapses LIM_HELD_TTL ms after its last change.
 * lim_quick: a job's class read without decoding it (the top-level
 * "displayName", exact or nothing) when a plain limit on it is full.
 * lim_wake: for an empty reply, 0 when the prefix grew by a whole
 * look-ahead and more jobs follow (pop again now), else the ms until the
 * first held rate limit has a token (lim_rate_wake), else nil. */
#define QLIMIT_HELD_LUA \
    "local LIM_HELD_TTL = 10000\n" \
    "local lim_wake, lim_seen = nil, {}\n" \
    "local function lim_by_key(k) -- a limit, or a per-key limit's sub, by its key\n" \
    "  for _, l in ipairs(lims) do if l.key == k then return l, l end end\n" \
    "  for _, l in ipairs(lims) do\n" \
    "    if l.tp ~= '' and string.sub(k, 1, #l.key + 3) == l.key .. ':k:' then\n" \
    "      local sk = string.sub(k, #l.key + 4)\n" \
    "      l.subs = l.subs or {}\n" \
    "      l.subs[sk] = l.subs[sk] or {key = k, conc = l.conc, rate = l.rate, burst = l.burst, tagged = true}\n" \
    "      return l.subs[sk], l\n" \
    "    end\n" \
    "  end\n" \
    "end\n" \
    "local function lim_all_full(keys)\n" \
    "  if next(keys) == nil then return false end\n" \
    "  for _, e in pairs(keys) do if not lim_full(e.o) then return false end end\n" \
    "  return true\n" \
    "end\n" \
    "local function lim_held_get(hk, head)\n" \
    "  local f = redis.call('hgetall', hk)\n" \
    "  if #f == 0 then return nil end\n" \
    "  local rec, h, bad = {keys = {}, n = 0}, nil, false\n" \
    "  for i = 1, #f - 1, 2 do\n" \
    "    if f[i] == 'h' then h = f[i + 1]\n" \
    "    elseif f[i] == 'n' then rec.n = tonumber(f[i + 1]) or 0\n" \
    "    elseif string.sub(f[i], 1, 2) == 'L:' then\n" \
    "      local o, p = lim_by_key(string.sub(f[i], 3))\n" \
    "      if o then rec.keys[o.key] = {o = o, p = p, c = tonumber(f[i + 1]) or 0} else bad = true end\n" \
    "    end\n" \
    "  end\n" \
    "  rec.head_ok = not bad and rec.n > 0 and h == redis.sha1hex(head)\n" \
    "  rec.ok = rec.head_ok and lim_all_full(rec.keys)\n" \
    "  return rec\n" \
    "end\n" \
    "local function lim_held_put(hk, head, n, keys, had)\n" \
    "  if had then redis.call('del', hk) end\n" \
    "  if n <= 0 or not head then return end\n" \
    "  local a = {'h', redis.sha1hex(head), 'n', n}\n" \
    "  for k, e in pairs(keys) do a[#a + 1] = 'L:' .. k; a[#a + 1] = e.c end\n" \
    "  redis.call('hset', hk, unpack(a))\n" \
    "  redis.call('pexpire', hk, LIM_HELD_TTL)\n" \
    "end\n" \
    "local function lim_quick(job, qname)\n" \
    "  local a, _, s = string.find(job, '\"displayName\":\"([^\"]*)\"')\n" \
    "  if not a then return nil end\n" \
    "  -- twice: Lua's cjson keeps the last, so not sure which class it is\n" \
    "  if string.find(job, '\"displayName\":', a + 1, true) then return nil end\n" \
    "  local o = string.find(job, '{', 2, true)\n" \
    "  if o and o < a then return nil end -- not at the top level, or not sure\n" \
    "  if string.find((string.gsub(s, '\\\\[\\\\/]', '')), '\\\\', 1, true) then return nil end\n" \
    "  local cls = string.gsub(s, '\\\\([\\\\/])', '%1')\n" \
    "  for _, l in ipairs(lims) do\n" \
    "    if l.tp == '' and (l.queue == '' or l.queue == qname) and (l.class == '' or l.class == cls)\n" \
    "       and lim_full(l) then return l end\n" \
    "  end\n" \
    "end\n" \
    "local function lim_count(keys, o, p, c)\n" \
    "  local e = keys[o.key] or {o = o, p = p, c = 0}\n" \
    "  e.c = e.c + c\n" \
    "  keys[o.key] = e\n" \
    "  p.held = (p.held or 0) + c\n" \
    "  lim_seen[#lim_seen + 1] = o\n" \
    "end\n" \
    "local lim_first = nil -- the held rate limit whose token comes first\n" \
    "local function lim_rate_wake()\n" \
    "  local w = nil\n" \
    "  for _, o in ipairs(lim_seen) do\n" \
    "    if o.rate > 0 and o.conc >= 0 and o.tok and o.tok < 1 then\n" \
    "      local ms = math.ceil((1 - o.tok) / o.rate)\n" \
    "      if not w or ms < w then w, lim_first = ms, o end\n" \
    "    end\n" \
    "  end\n" \
    "  return w\n" \
    "end\n" \
    "-- the wait of a worker held by a rate (an empty reply's), so that each\n" \
    "-- held worker wakes for a token of its own, not all of them for the next\n" \
    "-- one: behind the n workers told before (the bucket's n, one fewer every\n" \
    "-- token since nt: a worker that does not come back is forgotten), counted\n" \
    "-- from the bucket's own next token, so a late token moves the line. A\n" \
    "-- worker back for the token it was told (the ARGV after the token's\n" \
    "-- queue: 1) and too early waits for the next token itself, once, without\n" \
    "-- a place in the line. Past LIM_WAKE_MAX ms nothing is promised: the\n" \
    "-- worker polls after 100..300 ms (worker.c)\n" \
    "local LIM_WAKE_MAX = 200\n" \
    "local function lim_promise()\n" \
    "  local o = lim_first\n" \
    "  if not o then return lim_wake end\n" \
    "  local bk = o.key .. ':bucket'\n" \
    "  local t = lnow + (1 - o.tok) / o.rate -- when the refill (on whole ms) gives it a token\n" \
    "  local n = nil\n" \
    "  if ARGV[L0 + 5 + #lims * 7] ~= '1' then\n" \
    "    local h = redis.call('hmget', bk, 'n', 'nt')\n" \
    "    local nt = math.min(tonumber(h[2]) or lnow, lnow) -- as ts: Redis time may step back\n" \
    "    n = math.max(0, (tonumber(h[1]) or 0) - (lnow - nt) * o.rate)\n" \
    "    t = t + math.floor(n) / o.rate\n" \
    "  end\n" \
    "  local ms = math.max(1, math.ceil(math.ceil(t) - lnow_x))\n" \
    "  if n and ms < LIM_WAKE_MAX then\n" \
    "    redis.call('hset', bk, 'n', tostring(n + 1), 'nt', string.format('%.0f', lnow))\n" \
    "  end\n" \
    "  return ms\n" \
    "end\n" \
    "-- a look from the head inside the old prefix: its keys stay the record's\n" \
    "-- (every job of it still falls under one of them: which limits apply to a\n" \
    "-- job never changes); the first count above 1 loses the job taken, if\n" \
    "-- one was (counts are figures; a key at 1 may hold the rest)\n" \
    "local function lim_rec_keys(rec, taken)\n" \
    "  local keys = {}\n" \
    "  for k, e in pairs(rec.keys) do\n" \
    "    keys[k] = {o = e.o, p = e.p, c = e.c}\n" \
    "    if taken and e.c > 1 then keys[k].c = e.c - 1; taken = false end\n" \
    "  end\n" \
    "  return keys\n" \
    "end\n" \
    "local function lim_scan(q)\n" \
    "  local qk, qname = KEYS[q*5+1], ARGV[10 + q]\n" \
    "  local applies = false\n" \
    "  for _, l in ipairs(lims) do if l.queue == '' or l.queue == qname then applies = true end end\n" \
    "  local head = redis.call('lindex', qk, 0)\n" \
    "  if not head then return 'none' end\n" \
    "  if not applies then return 'plain' end\n" \
    "  local hk = string.sub(qk, 1, #qk - #qname - 7) .. 'qpool:held:' .. qname\n" \
    "  local rec = lim_held_get(hk, head)\n" \
    "  local start, keys, jobs = 0, {}, {head}\n" \
    "  local known = rec and rec.head_ok and rec.n or 0 -- what it says holds, full or not\n" \
    "  if rec and rec.ok then\n" \
    "    start = rec.n\n" \
    "    for _, e in pairs(rec.keys) do lim_count(keys, e.o, e.p, e.c) end\n" \
    "    jobs = redis.call('lrange', qk, start, start + math.min(lim_n, 8) - 1) -- the rest if need be\n" \
    "  end\n" \
    "  local pick, hit, i, more = nil, nil, 1, true\n" \
    "  while i <= #jobs do\n" \
    "    local h, full = nil, lim_quick(jobs[i], qname)\n" \
    "    local o = full\n" \
    "    if not full then\n" \
    "      h, full = lim_match(jobs[i], qname)\n" \
    "      o = full and (full.tp ~= '' and full.last_full or full)\n" \
    "    end\n" \
    "    if not full then pick, hit = i, h; break end\n" \
    "    lim_count(keys, o, full, 1)\n" \
    "    -- all held so far: look further (only then: a payload copied costs)\n" \
    "    if i == #jobs and more then\n" \
    "      more = false\n" \
    "      for _, j in ipairs(redis.call('lrange', qk, start + i, start + lim_n - 1)) do jobs[#jobs + 1] = j end\n" \
    "    end\n" \
    "    i = i + 1\n" \
    "  end\n" \
    "  if pick then\n" \
    "    local p = start + pick - 1\n" \
    "    if p > 0 then\n" \
    "      redis.call('lrem', qk, 1, jobs[pick])\n" \
    "      redis.call('lpush', qk, jobs[pick])\n" \
    "    else head = redis.call('lindex', qk, 1) end -- the head goes: the next one will be\n" \
    "    lim_take(hit)\n" \
    "    local n = p\n" \
    "    if p < known then n, keys = known - 1, lim_rec_keys(rec, true) end -- a rescan inside it\n" \
    "    lim_held_put(hk, head, n, keys, rec ~= nil)\n" \
    "    return 'pick'\n" \
    "  end\n" \
    "  -- only what this pop verified: an old record kept past a limit that got\n" \
    "  -- room would be written back on every pop and never lapse (review of\n" \
    "  -- 2026-11-29: the jobs past the first 50 then never ran)\n" \
    "  local n = start + #jobs\n" \
    "  if not (rec and rec.ok and n == rec.n) then lim_held_put(hk, head, n, keys, rec ~= nil) end\n" \
    "  if #jobs == lim_n and lim_n > 1 and n > known and (not rec or rec.ok)\n" \
    "     and redis.call('llen', qk) > n then lim_wake = 0 end\n" \
    "  return 'held'\n" \
    "end\n"

/* Runs in the pop script after `want` and `hold` are read, before the loop:
 * ARGV after the plain pop's (13 + nq of them): slot token, slot ttl ms,
 * look-ahead, number of limits, then per limit: key, class, queue,
 * concurrency, rate (jobs per ms), burst; then per limit its tag prefix;
 * then the queue (1-based) of the BLPOP's notify token (0: not known);
 * then 1 when the worker comes back for a token the last pop promised it. Leaves lim_skip[q] (every ready
 * job looked at on queue q is held by a full limit) and lim_blocked for the
 * loop and the final reply. A payload the pop would move aside falls under
 * no limit. Times are Redis's (TIME), so hosts' clocks do not matter. */
const char QLIMIT_PRE_LUA[] =
    "want = 1\n"
    "hold = false\n"
    "local L0 = 14 + nq\n"
    "local lim_token, lim_ttl, lim_n = ARGV[L0], tonumber(ARGV[L0 + 1]), tonumber(ARGV[L0 + 2])\n"
    "local lims = {}\n"
    "for i = 1, tonumber(ARGV[L0 + 3]) do\n"
    "  local b = L0 + 4 + (i - 1) * 6\n"
    "  lims[i] = {key = ARGV[b], class = ARGV[b + 1], queue = ARGV[b + 2], conc = tonumber(ARGV[b + 3]),\n"
    "             rate = tonumber(ARGV[b + 4]), burst = tonumber(ARGV[b + 5])}\n"
    "end\n"
    "for i, l in ipairs(lims) do l.tp = ARGV[L0 + 3 + #lims * 6 + i] or '' end -- tag prefixes follow\n"
    "local lt = redis.call('time')\n"
    "local lnow = tonumber(lt[1]) * 1000 + math.floor(tonumber(lt[2]) / 1000)\n"
    "local lnow_x = tonumber(lt[1]) * 1000 + tonumber(lt[2]) / 1000 -- with the us\n"
    "local function lim_used(l)\n"
    "  if not l.used then\n"
    "    redis.call('zremrangebyscore', l.key .. ':run', '-inf', string.format('%.0f', lnow))\n"
    "    l.used = redis.call('zcard', l.key .. ':run')\n"
    "  end\n"
    "  return l.used\n"
    "end\n"
    QLIMIT_REFILL_LUA
    "local function lim_tokens(l)\n"
    "  if not l.tok then\n"
    "    local h = redis.call('hmget', l.key .. ':bucket', 'tokens', 'ts')\n"
    "    local tok, ts = tonumber(h[1]), tonumber(h[2])\n"
    "    if not tok or not ts then tok, ts = l.burst, lnow end\n"
    "    if ts > lnow then ts = lnow end\n"
    "    l.tok = lim_refill(tok + (lnow - ts) * l.rate, l.burst, l.rate)\n"
    "  end\n"
    "  return l.tok\n"
    "end\n"
    "local function lim_full(l)\n"
    "  if l.conc < 0 then return true end -- a paused class: never room\n"
    "  return (l.conc > 0 and lim_used(l) >= l.conc) or (l.rate > 0 and lim_tokens(l) < 1)\n"
    "end\n"
    QLIMIT_TAGS_LUA
    "local function lim_match(job, qname)\n"
    "  local ok, d = pcall(cjson.decode, job)\n"
    "  if not ok or type(d) ~= 'table' or tonumber(d['attempts']) == nil then return {}, false end\n"
    "  -- a job the pop below cannot encode again is moved aside as poison: no slot for it\n"
    "  if not pcall(cjson.encode, d) then return {}, false end\n"
    "  local cls = d['displayName']\n"
    "  local hit = {}\n"
    "  for _, l in ipairs(lims) do\n"
    "    if (l.queue == '' or l.queue == qname) and (l.class == '' or l.class == cls) then\n"
    "      if l.tp ~= '' then\n"
    "        if lim_tagged(l, d, hit) then return hit, l end\n"
    "      else\n"
    "        if lim_full(l) then return hit, l end\n"
    "        hit[#hit + 1] = l\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  return hit, false\n"
    "end\n"
    "local function lim_take(hit)\n"
    "  for _, l in ipairs(hit) do\n"
    "    if l.conc > 0 then\n"
    "      redis.call('zadd', l.key .. ':run', string.format('%.0f', lnow + lim_ttl), lim_token)\n"
    "      redis.call('pexpire', l.key .. ':run', lim_ttl * 2)\n"
    "      lim_keys[#lim_keys + 1] = l.key .. ':run' -- the reply names every slot taken\n"
    "    end\n"
    "    if l.rate > 0 then\n"
    "      redis.call('hset', l.key .. ':bucket', 'tokens', tostring(l.tok - 1), 'ts', string.format('%.0f', lnow))\n"
    "      redis.call('pexpire', l.key .. ':bucket', math.ceil(l.burst / l.rate) + 1000)\n"
    "    end\n"
    "  end\n"
    "end\n"
    QLIMIT_HELD_LUA
    "local lim_skip, lim_blocked = {}, false\n"
    "for q = 0, nq - 1 do\n"
    "  local r = lim_scan(q)\n"
    "  if r == 'plain' or r == 'pick' then break end\n"
    "  if r == 'held' then\n"
    "    lim_skip[q] = true\n"
    "    if not lim_blocked then lim_blocked = q + 1 end\n"
    "  end\n"
    "end\n"
    "lim_wake = lim_wake or lim_rate_wake()\n"
    "-- an empty reply gives back the notify token the caller's BLPOP took: to\n"
    "-- the queue it came from (the ARGV after the tag prefixes, 1-based; 0 not\n"
    "-- known: the first held queue) when that queue's jobs are held; from a\n"
    "-- queue found empty it is dropped, as the plain pop does\n"
    "local lim_tq = tonumber(ARGV[L0 + 4 + #lims * 7]) or 0\n"
    "local function lim_token_back()\n"
    "  local q = lim_blocked - 1\n"
    "  if lim_tq > 0 then\n"
    "    if not lim_skip[lim_tq - 1] then return end\n"
    "    q = lim_tq - 1\n"
    "  end\n"
    "  redis.call('rpush', KEYS[q*5+4], 1)\n"
    "end\n"
    "-- what `qpool status` shows: the jobs each limit held back in this pop, and\n"
    "-- since when it has held some (the record lapses 2 s after the last)\n"
    "for _, l in ipairs(lims) do\n"
    "  if l.held then\n"
    "    redis.call('hset', l.key .. ':wait', 'n', l.held)\n"
    "    redis.call('hsetnx', l.key .. ':wait', 'since', string.format('%.0f', lnow))\n"
    "    redis.call('pexpire', l.key .. ':wait', 2000)\n"
    "  end\n"
    "end\n";

/* KEYS: the limits' :run sets. ARGV: token, ttl ms. */
static const char BEAT_LUA[] =
    "local t = redis.call('time')\n"
    "local ttl = tonumber(ARGV[2])\n"
    "local exp = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl)\n"
    "local n = 0\n"
    "for _, k in ipairs(KEYS) do\n"
    "  if redis.call('zscore', k, ARGV[1]) then\n"
    "    redis.call('zadd', k, exp, ARGV[1])\n"
    "    redis.call('pexpire', k, ttl * 2)\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "return n";

/* KEYS: the limits' :run sets. ARGV: token. */
static const char END_LUA[] =
    "local n = 0\n"
    "for _, k in ipairs(KEYS) do n = n + redis.call('zrem', k, ARGV[1]) end\n"
    "return n";

/* KEYS: run, bucket, wait. ARGV: rate (jobs per ms, 0: none), burst.
 * Read-only: {slots in use, tokens x 1000 as the pop sees them (lim_refill;
 * -1: no rate), jobs held back,
 * ms since they have been}. */
static const char READ_LUA[] =
    QLIMIT_REFILL_LUA
    "local t = redis.call('time')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local used = redis.call('zcount', KEYS[1], '(' .. string.format('%.0f', now), '+inf')\n"
    "local tok, rate, burst = -1, tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "if rate > 0 then\n"
    "  local h = redis.call('hmget', KEYS[2], 'tokens', 'ts')\n"
    "  local tk, ts = tonumber(h[1]), tonumber(h[2])\n"
    "  if not tk or not ts then tok = burst else tok = lim_refill(tk + math.max(0, now - ts) * rate, burst, rate) end\n"
    "  tok = math.floor(tok * 1000)\n"
    "end\n"
    "local w = redis.call('hmget', KEYS[3], 'n', 'since')\n"
    "local since = tonumber(w[2])\n"
    "return {used, tok, tonumber(w[1]) or 0, since and math.max(0, now - since) or 0}";

/* The cluster pop's lease (one limit, its own slot). KEYS: run, bucket,
 * wait. ARGV: token, ttl ms, concurrency (-1: a paused class), rate (jobs
 * per ms), burst, jobs held when full. 1: the slot and the token are
 * taken; 0: full (the :wait record says so, as the single-Redis pop's). */
static const char LEASE_LUA[] =
    QLIMIT_REFILL_LUA
    "local t = redis.call('time')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local ttl, conc, rate, burst = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])\n"
    "local full, tok = conc < 0, nil\n"
    "if not full and conc > 0 then\n"
    "  redis.call('zremrangebyscore', KEYS[1], '-inf', string.format('%.0f', now))\n"
    "  full = redis.call('zcard', KEYS[1]) >= conc\n"
    "end\n"
    "if not full and rate > 0 then\n"
    "  local h = redis.call('hmget', KEYS[2], 'tokens', 'ts')\n"
    "  local tk, ts = tonumber(h[1]), tonumber(h[2])\n"
    "  if not tk or not ts then tk, ts = burst, now end\n"
    "  if ts > now then ts = now end\n"
    "  tok = lim_refill(tk + (now - ts) * rate, burst, rate)\n"
    "  full = tok < 1\n"
    "end\n"
    "if full then\n"
    "  redis.call('hset', KEYS[3], 'n', ARGV[6])\n"
    "  redis.call('hsetnx', KEYS[3], 'since', string.format('%.0f', now))\n"
    "  redis.call('pexpire', KEYS[3], 2000)\n"
    "  return 0\n"
    "end\n"
    "if conc > 0 then\n"
    "  redis.call('zadd', KEYS[1], string.format('%.0f', now + ttl), ARGV[1])\n"
    "  redis.call('pexpire', KEYS[1], ttl * 2)\n"
    "end\n"
    "if rate > 0 then\n"
    "  redis.call('hset', KEYS[2], 'tokens', tostring(tok - 1), 'ts', string.format('%.0f', now))\n"
    "  redis.call('pexpire', KEYS[2], math.ceil(burst / rate) + 1000)\n"
    "end\n"
    "return 1";

/* Give a lease back. KEYS: run, bucket. ARGV: token, concurrency, rate,
 * burst. The token is refunded as the bucket stands now, up to what the
 * pop may hold (the burst and the kept lateness: lim_refill). */
static const char UNLEASE_LUA[] =
    QLIMIT_REFILL_LUA
    "if tonumber(ARGV[2]) > 0 then redis.call('zrem', KEYS[1], ARGV[1]) end\n"
    "local rate, burst = tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "if rate > 0 then\n"
    "  local t = redis.call('time')\n"
    "  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "  local h = redis.call('hmget', KEYS[2], 'tokens', 'ts')\n"
    "  local tk, ts = tonumber(h[1]), tonumber(h[2])\n"
    "  if tk and ts then\n"
    "    if ts > now then ts = now end\n"
    "    tk = math.min(lim_refill(tk + (now - ts) * rate, burst, rate) + 1, burst + lim_late(rate))\n"
    "    redis.call('hset', KEYS[2], 'tokens', tostring(tk), 'ts', string.format('%.0f', now))\n"
    "  end\n"
    "end\n"
    "return 1";

/* The cluster pop's lease for a per-key limit (tag_prefix), every key of
 * one job at once in the limit's slot (its keys keep the limit's hash tag).
 * KEYS: the limit's wait and own run, then per key: run, bucket. ARGV:
 * token, ttl ms, concurrency, rate (jobs per ms), burst, jobs held when
 * full. As the single-Redis pop's lim_tagged: any key full holds the job
 * (the :wait record says so); else each key takes its slot and token and
 * the limit's own :run a slot (what status counts as in use). 1 / 0. */
static const char LEASE_KEYS_LUA[] =
    QLIMIT_REFILL_LUA
    "local t = redis.call('time')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local ttl, conc, rate, burst = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])\n"
    "local snow, toks = string.format('%.0f', now), {}\n"
    "for i = 3, #KEYS - 1, 2 do\n"
    "  local full = conc < 0 -- a paused class: never room\n"
    "  if conc > 0 then\n"
    "    redis.call('zremrangebyscore', KEYS[i], '-inf', snow)\n"
    "    full = redis.call('zcard', KEYS[i]) >= conc\n"
    "  end\n"
    "  if not full and rate > 0 then\n"
    "    local h = redis.call('hmget', KEYS[i + 1], 'tokens', 'ts')\n"
    "    local tk, ts = tonumber(h[1]), tonumber(h[2])\n"
    "    if not tk or not ts then tk, ts = burst, now end\n"
    "    if ts > now then ts = now end\n"
    "    toks[i] = lim_refill(tk + (now - ts) * rate, burst, rate)\n"
    "    full = toks[i] < 1\n"
    "  end\n"
    "  if full then\n"
    "    redis.call('hset', KEYS[1], 'n', ARGV[6])\n"
    "    redis.call('hsetnx', KEYS[1], 'since', snow)\n"
    "    redis.call('pexpire', KEYS[1], 2000)\n"
    "    return 0\n"
    "  end\n"
    "end\n"
    "local exp = string.format('%.0f', now + ttl)\n"
    "for i = 3, #KEYS - 1, 2 do\n"
    "  if conc > 0 then\n"
    "    redis.call('zadd', KEYS[i], exp, ARGV[1])\n"
    "    redis.call('pexpire', KEYS[i], ttl * 2)\n"
    "  end\n"
    "  if rate > 0 then\n"
    "    redis.call('hset', KEYS[i + 1], 'tokens', tostring(toks[i] - 1), 'ts', snow)\n"
    "    redis.call('pexpire', KEYS[i + 1], math.ceil(burst / rate) + 1000)\n"
    "  end\n"
    "end\n"
    "if conc > 0 then\n"
    "  redis.call('zremrangebyscore', KEYS[2], '-inf', snow)\n"
    "  redis.call('zadd', KEYS[2], exp, ARGV[1])\n"
    "  redis.call('pexpire', KEYS[2], ttl * 2)\n"
    "end\n"
    "return 1";

rscript_t SCRIPT_LIMIT_BEAT, SCRIPT_LIMIT_END, SCRIPT_LIMIT_READ, SCRIPT_LIMIT_LEASE, SCRIPT_LIMIT_UNLEASE;
static rscript_t SCRIPT_LIMIT_LEASE_KEYS;

void qlimit_scripts_init(void)
{
    static bool done;
    if (done) return;
    rscript_init(&SCRIPT_LIMIT_BEAT, BEAT_LUA);
    rscript_init(&SCRIPT_LIMIT_END, END_LUA);
    rscript_init(&SCRIPT_LIMIT_READ, READ_LUA);
    rscript_init(&SCRIPT_LIMIT_LEASE, LEASE_LUA);
    rscript_init(&SCRIPT_LIMIT_UNLEASE, UNLEASE_LUA);
    rscript_init(&SCRIPT_LIMIT_LEASE_KEYS, LEASE_KEYS_LUA);
    done = true;
}

char *qlimit_key(const char *prefix, const char *id, bool cluster)
{
    if (!cluster) return xasprintf("%sqpool:limit:%s", prefix, id);
    /* an id starting with '}' would make an empty tag (the whole key hashed):
     * it gets a '_' in front, and so does one starting with '_', so that no
     * two ids share keys ("}x|A" and "_}x|A" did: review of 2026-11-29) */
    return xasprintf("%sqpool:limit:{%s%s}", prefix, *id == '}' || *id == '_' ? "_" : "", id);
}

char *qlimit_paused_key(const char *prefix, bool cluster)
{
    return xasprintf("%s%s", prefix, cluster ? QLIMIT_PAUSED_HASH_CLUSTER : QLIMIT_PAUSED_HASH);
}

void qlimits_add(qlimits_t *ls, const char *prefix, const char *id, const char *class_name, const char *queue,
                 int concurrency, double rate_per_s, int burst)
{
    ls->v = xrealloc(ls->v, sizeof *ls->v * (size_t)(ls->n + 1));
    qlimit_t *l = &ls->v[ls->n++];
    memset(l, 0, sizeof *l);
    l->key = qlimit_key(prefix, id, ls->cluster);
    l->run = xasprintf("%s:run", l->key);
    l->class_name = xstrdup(class_name ? class_name : "");
    l->queue = xstrdup(queue ? queue : "");
    l->concurrency = concurrency;
    snprintf(l->conc, sizeof l->conc, "%d", concurrency);
    snprintf(l->rate, sizeof l->rate, "%.9g", rate_per_s / 1000.0);
    snprintf(l->burst, sizeof l->burst, "%d", burst > 0 ? burst : 1);
    snprintf(ls->ttl, sizeof ls->ttl, "%d", QLIMIT_SLOT_TTL_MS);
    snprintf(ls->look, sizeof ls->look, "%d", QLIMIT_LOOKAHEAD);
    snprintf(ls->count, sizeof ls->count, "%d", ls->n);
}

void qlimits_add_paused(qlimits_t *ls, const char *prefix, const char *class_name)
{
    char *id = xasprintf("paused:%s", class_name);
    qlimits_add(ls, prefix, id, class_name, "", QLIMIT_PAUSED, 0, 1);
    free(id);
}

void qlimits_truncate(qlimits_t *ls, int n)
{
    if (n < 0 || n >= ls->n) return;
    for (int i = n; i < ls->n; i++)
        FREE_ALL(ls->v[i].key, ls->v[i].run, ls->v[i].class_name, ls->v[i].queue, ls->v[i].tag_prefix);
    ls->n = n;
    snprintf(ls->count, sizeof ls->count, "%d", ls->n);
}

void qlimits_free(qlimits_t *ls)
{
    for (int i = 0; i < ls->n; i++)
        FREE_ALL(ls->v[i].key, ls->v[i].run, ls->v[i].class_name, ls->v[i].queue, ls->v[i].tag_prefix);
    free(ls->v);
    memset(ls, 0, sizeof *ls);
}

void qlimits_set_tag_prefix(qlimits_t *ls, const char *tag_prefix)
{
    if (!ls->n) return;
    free(ls->v[ls->n - 1].tag_prefix);
    ls->v[ls->n - 1].tag_prefix = tag_prefix && *tag_prefix ? xstrdup(tag_prefix) : NULL;
}

int qlimits_argc(const qlimits_t *ls)
{
    return 4 + 7 * ls->n;
}

void qlimits_fill_argv(const qlimits_t *ls, const char *token, const char **argv)
{
    int o = 0;
    argv[o++] = token;
    argv[o++] = ls->ttl;
    argv[o++] = ls->look;
    argv[o++] = ls->count;
    for (int i = 0; i < ls->n; i++) {
        const qlimit_t *l = &ls->v[i];
        argv[o++] = l->key;
        argv[o++] = l->class_name;
        argv[o++] = l->queue;
        argv[o++] = l->conc;
        argv[o++] = l->rate;
        argv[o++] = l->burst;
    }
    for (int i = 0; i < ls->n; i++) argv[o++] = ls->v[i].tag_prefix ? ls->v[i].tag_prefix : "";
}

/* The slot script s over one :run set: the slots renewed / given back, or -1. */
static int slot_script_one(rconn_t *c, const rscript_t *s, const char *run, const char *token, const char *ttl)
{
    const char *argv[] = {run, token, ttl};
    redisReply *r = NULL;
    int rv = rconn_script(c, s, 1, s == &SCRIPT_LIMIT_BEAT ? 3 : 2, argv, NULL, -1, -1, &r);
    int n = rv == RC_OK && r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    if (r) freeReplyObject(r);
    return n;
}

/* On a Redis Cluster: the slot script once per :run set the pop named
 * (two limits' sets are in two slots; a per-key limit's keys share their
 * limit's): the counts summed; -1 if any failed. */
static int slot_script_each(rconn_t *c, const rscript_t *s, const qlimits_t *ls, const char *token,
                            char *const *xkeys, int nx)
{
    int sum = 0;
    for (int i = 0; i < nx; i++) {
        int n = slot_script_one(c, s, xkeys[i], token, ls->ttl);
        sum = n < 0 || sum < 0 ? -1 : sum + n;
    }
    return sum;
}

/* The slot script over the :run sets the pop named (xkeys: only the pop
 * knows which slots a job holds; on one Redis it decides the class with
 * Lua's JSON reader): one call, or on a Cluster one per set. */
static int slot_script(rconn_t *c, const rscript_t *s, const qlimits_t *ls, const char *token, char *const *xkeys,
                       int nx)
{
    if (rconn_is_cluster(c)) return slot_script_each(c, s, ls, token, xkeys, nx);
    const char **argv = xcalloc((size_t)nx + 2, sizeof *argv);
    int k = 0;
    for (int i = 0; i < nx; i++) argv[k++] = xkeys[i];
    if (!k) {
        free(argv);
        return 0;
    }
    argv[k] = token;
    argv[k + 1] = ls->ttl;
    redisReply *r = NULL;
    int rv = rconn_script(c, s, k, k + (s == &SCRIPT_LIMIT_BEAT ? 2 : 1), argv, NULL, -1, -1, &r);
    free(argv);
    int n = rv == RC_OK && r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    if (r) freeReplyObject(r);
    return n;
}

int qlimit_beat(rconn_t *c, const qlimits_t *ls, const char *token, char *const *xkeys, int nx)
{
    qlimit_scripts_init();
    return slot_script(c, &SCRIPT_LIMIT_BEAT, ls, token, xkeys, nx);
}

int qlimit_end(rconn_t *c, const qlimits_t *ls, const char *token, char *const *xkeys, int nx)
{
    qlimit_scripts_init();
    return slot_script(c, &SCRIPT_LIMIT_END, ls, token, xkeys, nx);
}

int qlimit_read(rconn_t *c, const qlimit_t *l, qlimit_stat_t *out)
{
    qlimit_scripts_init();
    memset(out, 0, sizeof *out);
    char *bucket = xasprintf("%s:bucket", l->key), *wait = xasprintf("%s:wait", l->key);
    const char *argv[] = {l->run, bucket, wait, l->rate, l->burst};
    redisReply *r = NULL;
    int rv = rconn_script(c, &SCRIPT_LIMIT_READ, 3, 5, argv, NULL, -1, -1, &r);
    FREE_ALL(bucket, wait);
    bool ok = rv == RC_OK && r && r->type == REDIS_REPLY_ARRAY && r->elements == 4;
    for (size_t i = 0; ok && i < 4; i++) ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (ok) {
        out->in_use = r->element[0]->integer;
        out->tokens = r->element[1]->integer < 0 ? -1 : (double)r->element[1]->integer / 1000.0;
        out->waiting = r->element[2]->integer;
        out->waited_ms = r->element[3]->integer;
        out->known = true;
    }
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------ cluster */

bool qlimit_applies(const qlimit_t *l, const char *queue, const char *cls)
{
    return (!*l->queue || !strcmp(l->queue, queue)) && (!*l->class_name || (cls && !strcmp(l->class_name, cls)));
}

bool qlimit_same_limits(const qlimits_t *ls, const char *queue, const char *a, bool aplain, const char *b,
                        bool bplain)
{
    for (int i = 0; i < ls->n; i++)
        if ((!aplain && qlimit_applies(&ls->v[i], queue, a)) != (!bplain && qlimit_applies(&ls->v[i], queue, b)))
            return false;
    return true;
}

int qlimit_first_full(const qlimits_t *ls, const char *queue, const char *cls, const bool *full)
{
    for (int i = 0; i < ls->n; i++)
        if (full[i] && qlimit_applies(&ls->v[i], queue, cls)) return i;
    return -1;
}

/* The limit's key for this job (a per-key limit's: qlimit_lease_keys). */
static char *lease_key(const qlimit_t *l, const char *suffix)
{
    return xasprintf("%s%s", l->key, suffix);
}

int qlimit_lease(rconn_t *c, const qlimit_t *l, const char *ttl, const char *token, long held)
{
    qlimit_scripts_init();
    char *run = lease_key(l, ":run"), *bucket = lease_key(l, ":bucket"), *wait = lease_key(l, ":wait");
    char nheld[24];
    snprintf(nheld, sizeof nheld, "%ld", held > 0 ? held : 1);
    const char *argv[] = {run, bucket, wait, token, ttl, l->conc, l->rate, l->burst, nheld};
    redisReply *r = NULL;
    int rv = rconn_script(c, &SCRIPT_LIMIT_LEASE, 3, 9, argv, NULL, -1, -1, &r);
    FREE_ALL(run, bucket, wait);
    int out = rv == RC_OK && r && r->type == REDIS_REPLY_INTEGER ? (r->integer ? 1 : 0) : -1;
    if (out < 0 && rv == RC_OK && r && r->type == REDIS_REPLY_ERROR) rconn_drop(c, r->str);
    if (r) freeReplyObject(r);
    return out;
}

int qlimit_unlease(rconn_t *c, const qlimit_t *l, const char *token)
{
    qlimit_scripts_init();
    char *run = lease_key(l, ":run"), *bucket = lease_key(l, ":bucket");
    const char *argv[] = {run, bucket, token, l->conc, l->rate, l->burst};
    redisReply *r = NULL;
    int rv = rconn_script(c, &SCRIPT_LIMIT_UNLEASE, 2, 6, argv, NULL, -1, -1, &r);
    FREE_ALL(run, bucket);
    int out = rv == RC_OK && r && r->type == REDIS_REPLY_INTEGER ? 0 : -1;
    if (r) freeReplyObject(r);
    return out;
}

/* A per-key limit's key: <key>:k:<kid><suffix> (the limit's hash tag kept). */
static char *kid_key(const qlimit_t *l, const qtag_t *kid, const char *suffix)
{
    return xasprintf("%s:k:%s%s", l->key, kid->s, suffix);
}

int qlimit_lease_keys(rconn_t *c, const qlimit_t *l, const qtags_t *kids, const char *ttl, const char *token,
                      long held)
{
    qlimit_scripts_init();
    int nk = 2 + 2 * kids->n, na = nk + 6;
    const char **argv = xcalloc((size_t)na, sizeof *argv);
    char *wait = lease_key(l, ":wait"), nheld[24];
    argv[0] = wait;
    argv[1] = l->run;
    for (int i = 0; i < kids->n; i++) {
        argv[2 + 2 * i] = kid_key(l, &kids->v[i], ":run");
        argv[3 + 2 * i] = kid_key(l, &kids->v[i], ":bucket");
    }
    snprintf(nheld, sizeof nheld, "%ld", held > 0 ? held : 1);
    const char *rest[] = {token, ttl, l->conc, l->rate, l->burst, nheld};
    memcpy(argv + nk, rest, sizeof rest);
    redisReply *r = NULL;
    int rv = rconn_script(c, &SCRIPT_LIMIT_LEASE_KEYS, nk, na, argv, NULL, -1, -1, &r);
    for (int i = 2; i < nk; i++) free((char *)argv[i]);
    FREE_ALL(argv, wait);
    int out = rv == RC_OK && r && r->type == REDIS_REPLY_INTEGER ? (r->integer ? 1 : 0) : -1;
    if (out < 0 && rv == RC_OK && r && r->type == REDIS_REPLY_ERROR) rconn_drop(c, r->str);
    if (r) freeReplyObject(r);
    return out;
}

/* UNLEASE_LUA on one run and bucket. */
static int unlease_one(rconn_t *c, const char *run, const char *bucket, const char *token, const char *conc,
                       const char *rate, const char *burst)
{
    const char *argv[] = {run, bucket, token, conc, rate, burst};
    redisReply *r = NULL;
    int rv = rconn_script(c, &SCRIPT_LIMIT_UNLEASE, 2, 6, argv, NULL, -1, -1, &r);
    int out = rv == RC_OK && r && r->type == REDIS_REPLY_INTEGER ? 0 : -1;
    if (r) freeReplyObject(r);
    return out;
}

int qlimit_unlease_keys(rconn_t *c, const qlimit_t *l, const qtags_t *kids, const char *token)
{
    qlimit_scripts_init();
    int out = 0;
    for (int i = 0; i < kids->n; i++) {
        char *run = kid_key(l, &kids->v[i], ":run"), *bucket = kid_key(l, &kids->v[i], ":bucket");
        if (unlease_one(c, run, bucket, token, l->conc, l->rate, l->burst) < 0) out = -1;
        FREE_ALL(run, bucket);
    }
    char *bucket = lease_key(l, ":bucket");
    if (l->concurrency > 0 && unlease_one(c, l->run, bucket, token, l->conc, "0", l->burst) < 0) out = -1;
    free(bucket);
    return out;
}

int qlimit_keys_runs(const qlimit_t *l, const qtags_t *kids, char ***runs, int n)
{
    if (l->concurrency <= 0) return n;
    *runs = xrealloc(*runs, sizeof **runs * (size_t)(n + kids->n + 1));
    for (int i = 0; i < kids->n; i++) (*runs)[n++] = kid_key(l, &kids->v[i], ":run");
    (*runs)[n++] = xstrdup(l->run);
    return n;
}
