<?php

namespace Qpool\Laravel;

use Throwable;

/**
 * The app agent's ops on the app's own failer (`queue.failer`: failed_jobs,
 * or whatever the app configures), for `qpool failed --app POOL`: what
 * `queue:failed`, `queue:retry` and `queue:forget` do, over the agent's wire
 * (Agent.php; the master passes them through from the control socket):
 *
 *   failed        {"op":"failed","limit":20,"offset":0,"queue":"..","class":"..","text":"..","uuid":"..",
 *                  "tag":"..","since":1764380000,"until":1764390000}
 *                 -> {"failed":[{"id":"..","uuid":"..","connection":"..","queue":"..","class":"..",
 *                     "exception":"first line","failed_at":1764380000,"attempts":3}],"total":12,"offset":0}
 *                 Newest first, as queue:failed lists them; every filter is
 *                 optional (class and queue exact, text case-insensitive in
 *                 the payload or the exception, tag one of the payload's tags);
 *                 "partial":true when a filtered scan ran out of time (list()).
 *   failed-show   {"op":"failed-show","job":"ID"} -> {"job":{... "payload":"..","exception":".."}}
 *   failed-retry  {"op":"failed-retry","jobs":["ID"]} -> {"retried":["ID"],"missing":["ID"]}
 *   failed-forget {"op":"failed-forget","jobs":["ID"]} -> {"forgotten":["ID"],"missing":["ID"]}
 *
 * IDs are the failer's own (queue:retry's): a uuid for the default
 * database-uuids failer, a row id for the plain database one.
 */
final class AgentFailed
{
    private const PAGE_MAX = 50;

    private const IDS_MAX = 100;

    private const EXCEPTION_LINE = 300;

    /** A filtered list of a database failer reads this many rows at a time, for this many seconds at most. */
    private const SCAN_CHUNK = 50;

    private const SCAN_BUDGET = 3.0;

    /**
     * One statement of a filtered scan looks at this many ids at most (a
     * primary key range, newest first), however few of them match: a where
     * on an unindexed column (failed_at, queue) never walks the whole table
     * in one statement, past the budget and the agent's alarm.
     */
    private const SCAN_SPAN = 1000;

    /**
     * The since/until bounds in the query are widened by a day: failed_at is
     * wall clock in the app's timezone, which goes back at a DST fold (or a
     * zone's offset change); matches() decides each row read.
     */
    private const WINDOW_SLACK = 86400;

    /** The last second a Y-m-d H:i:s string can say (9999-12-31 23:59:59 UTC). */
    private const WINDOW_MAX = 253402300799;

    /** An unfiltered list counts at most this many rows (then "partial": at least so many). */
    private const COUNT_MAX = 10000;

    private const DB_FAILER = 'Illuminate\\Queue\\Failed\\DatabaseFailedJobProvider';

    private const DB_UUID_FAILER = 'Illuminate\\Queue\\Failed\\DatabaseUuidFailedJobProvider';

    /** A reply line's budget (Agent::LINE_MAX less room for the rest). */
    private const REPLY_MAX = 60000;

    /** @var object the booted application */
    private $app;

    public function __construct($app)
    {
        $this->app = $app;
    }

    public function failer()
    {
        return $this->app['queue.failer'];
    }

    /**
     * One page of the failer's jobs that match the filters. A database
     * failer (failed_jobs) is paged in its query, never read whole: no
     * filter, the page and a count; a filter, the rows newest first SCAN_CHUNK
     * at a time, each chunk within SCAN_SPAN ids (queue, since and until in
     * the query: window()), for at
     * most SCAN_BUDGET seconds (then "total" counts those
     * scanned, and "partial" says so). Another failer has only all().
     */
    public function list(array $req): array
    {
        $limit = min(max(is_int($req['limit'] ?? null) ? $req['limit'] : 20, 1), self::PAGE_MAX);
        $offset = max(is_int($req['offset'] ?? null) ? $req['offset'] : 0, 0);
        $table = $this->table();

        if ($table !== null && ! $this->filtered($req)) {
            // counted up to COUNT_MAX rows (a subquery with a limit): a count of a
            // huge failed_jobs must not run into the agent's alarm
            $counted = (clone $table)->select('id')->limit(self::COUNT_MAX + 1);
            $total = $table->getConnection()->query()->fromSub($counted, 'qpool_failed_count')->count();
            $page = (clone $table)->orderBy('id', 'desc')->offset($offset)->limit($limit)->get();
            $out = ['failed' => $this->fit(array_map(function ($row) {
                return $this->summary($this->dbRecord($row));
            }, $page->all())), 'total' => min($total, self::COUNT_MAX), 'offset' => $offset]
                + ($total > self::COUNT_MAX ? ['partial' => true] : []);
        } else {
            $out = $this->scan($table, $req, $limit, $offset);
        }

        return $out;
    }

    /** The filtered page: [failed, total, offset] and "partial" when the time ran out. */
    private function scan($table, array $req, int $limit, int $offset): array
    {
        $rows = [];
        $total = 0;
        $partial = false;

        foreach ($this->rows($table, $req, microtime(true) + self::SCAN_BUDGET, $partial) as $row) {
            if ($this->matches($row, $req) && $total++ >= $offset && count($rows) < $limit) {
                $rows[] = $this->summary($row);
            }
        }

        return ['failed' => $this->fit($rows), 'total' => $total, 'offset' => $offset] + ($partial ? ['partial' => true] : []);
    }

    /** The failer's rows newest first (a database failer's in chunks, until $until). */
    private function rows($table, array $req, float $until, bool &$partial): \Generator
    {
        if ($table === null) {
            foreach ((array) $this->failer()->all() as $row) {
                yield self::record($row);
            }

            return;
        }

        $ids = clone $table;

        if (is_string($req['queue'] ?? null) && $req['queue'] !== '') {
            $table = $table->where('queue', $req['queue']);
        }

        $table = $this->window($table, $req);

        for ($last = self::below($ids, null); $last !== null; ) {
            if (microtime(true) > $until) {
                $partial = true;

                return;
            }

            $chunk = $this->chunk($table, $last);

            foreach ($chunk as $row) {
                yield $this->dbRecord($row);
            }

            $last = count($chunk) === self::SCAN_CHUNK ? self::rowId(end($chunk), $last[1]) : self::below($ids, $last);
        }
    }

    /**
     * The next chunk of a filtered scan: the newest SCAN_CHUNK rows that
     * match the query, of ids below $last[0] (none: from the top) and, when
     * ids are integers, at least $last[0] - SCAN_SPAN.
     */
    private function chunk($table, array $last): array
    {
        [$below, $integers] = $last;
        $q = (clone $table)->orderBy('id', 'desc')->limit(self::SCAN_CHUNK);

        if ($below !== null) {
            $q->where('id', '<', $below);
        }

        if ($integers && $below !== null) {
            $q->where('id', '>=', $below - self::SCAN_SPAN);
        }

        return $q->get()->all();
    }

    /**
     * Where the scan goes on after a chunk that was not full: [an id to read
     * below, ids are integers], or null when no row is left. With integer
     * ids, a chunk that stopped short looked at every id of its span, so the
     * scan goes on below the span, from the newest id left there (a primary
     * key lookup: a gap of deleted ids costs nothing); otherwise the chunk
     * was the whole rest.
     */
    private static function below($ids, ?array $last): ?array
    {
        if ($last !== null && ! $last[1]) {
            return null;
        }

        $q = clone $ids;

        if ($last !== null && $last[0] !== null) {
            $q->where('id', '<', $last[0] - self::SCAN_SPAN);
        }

        $top = $q->max('id');

        if ($top === null) {
            return null;
        }

        return self::integer($top) ? [(int) $top + 1, true] : [null, false];
    }

    /** Where the scan goes on after a full chunk: below its last row. */
    private static function rowId($row, bool $integers): array
    {
        $id = $row->id;

        return $integers && self::integer($id) ? [(int) $id, true] : [$id, false];
    }

    /** Is a primary key an integer (a row id, not a uuid)? */
    private static function integer($id): bool
    {
        return is_int($id) || (is_string($id) && preg_match('/^[0-9]{1,18}$/', $id) === 1);
    }

    /**
     * The query kept near since/until (on failed_at, as the failer writes it:
     * Date::now() in the app's timezone, whole seconds), so that rows far
     * out of the window are not sent to the agent; matches() decides each
     * row read. The bounds are widened by WINDOW_SLACK (a DST fold), and one
     * out of the years 1970-9999 adds no condition (a database that cannot
     * compare such a date would fail the list).
     */
    private function window($table, array $req)
    {
        $since = is_int($req['since'] ?? null) ? $req['since'] - self::WINDOW_SLACK : null;
        $until = is_int($req['until'] ?? null) ? $req['until'] + 1 + self::WINDOW_SLACK : null;

        if ($since !== null && $since >= 0 && $since <= self::WINDOW_MAX) {
            $table = $table->where('failed_at', '>=', date('Y-m-d H:i:s', $since));
        }

        if ($until !== null && $until >= 0 && $until <= self::WINDOW_MAX) {
            $table = $table->where('failed_at', '<', date('Y-m-d H:i:s', $until));
        }

        return $table;
    }

    /** Rows cut to fit a reply line. */
    private function fit(array $rows): array
    {
        while ($rows !== [] && strlen((string) json_encode($rows, Agent::JSON_FLAGS)) > self::REPLY_MAX) {
            array_pop($rows);
        }

        return $rows;
    }

    /** Is any filter asked? */
    private function filtered(array $req): bool
    {
        foreach (['queue', 'class', 'text', 'uuid', 'tag'] as $k) {
            if (is_string($req[$k] ?? null) && $req[$k] !== '') {
                return true;
            }
        }

        return is_int($req['since'] ?? null) || is_int($req['until'] ?? null);
    }

    /**
     * The failed_jobs query of a database failer (its own getTable(): its
     * connection and table), or null for another failer.
     */
    private function table()
    {
        $failer = $this->failer();

        if (! (is_a($failer, self::DB_UUID_FAILER) || is_a($failer, self::DB_FAILER))) {  // an app's subclass too
            return null;
        }

        return \Closure::bind(function () {
            return $this->getTable();
        }, $failer, get_class($failer))();
    }

    /** A failed_jobs row as the failer's all() has it (the uuid failer's id is the uuid). */
    private function dbRecord($row): array
    {
        $row = self::record($row);

        if (is_a($this->failer(), self::DB_UUID_FAILER)) {
            $row['id'] = $row['uuid'] ?? $row['id'];
            unset($row['uuid']);
        }

        return $row;
    }

    /** One job with its payload and exception, cut to fit a reply line. */
    public function show(array $req): array
    {
        $id = self::id($req['job'] ?? null);
        $row = $id === null ? null : $this->failer()->find($id);

        if ($row === null) {
            throw new \RuntimeException('no failed job '.($id ?? '(no id)').' in the app\'s failer');
        }

        $row = self::record($row);
        $job = $this->summary($row);

        foreach ([24000, 8000, 2000, 200] as $max) {
            $job['payload'] = Agent::text((string) ($row['payload'] ?? ''), $max);
            $job['exception'] = Agent::text((string) ($row['exception'] ?? ''), $max);

            if (strlen((string) json_encode($job, Agent::JSON_FLAGS)) <= self::REPLY_MAX) {
                break;
            }
        }

        return ['job' => $job];
    }

    /** queue:forget for each id asked. */
    public function forget(array $req): array
    {
        $forgotten = $missing = [];

        foreach (self::ids($req) as $id) {
            if ($this->failer()->forget($id)) {
                $forgotten[] = $id;
            } else {
                $missing[] = $id;
            }
        }

        return ['forgotten' => $forgotten, 'missing' => $missing];
    }

    /** The ids asked (strings of the failer's ids, at most IDS_MAX). */
    public static function ids(array $req): array
    {
        $out = [];

        foreach (array_slice(is_array($req['jobs'] ?? null) ? $req['jobs'] : [], 0, self::IDS_MAX) as $id) {
            $id = self::id($id);

            if ($id !== null) {
                $out[] = $id;
            }
        }

        return array_values(array_unique($out));
    }

    private static function id($id): ?string
    {
        return is_string($id) && $id !== '' && strlen($id) <= 64 && preg_match('/^[A-Za-z0-9._:-]+$/', $id) ? $id : null;
    }

    /** A failer's row (an object or an array) as an array. */
    private static function record($row): array
    {
        return is_array($row) ? $row : (array) $row;
    }

    private static function payload(array $row): array
    {
        $p = json_decode((string) ($row['payload'] ?? ''), true);

        return is_array($p) ? $p : [];
    }

    private static function failedAt(array $row): ?int
    {
        $t = $row['failed_at'] ?? null;

        if (is_numeric($t)) {
            return (int) $t;
        }

        try {
            return is_string($t) && $t !== '' ? (new \DateTimeImmutable($t))->getTimestamp() : null;
        } catch (Throwable $e) {
            return null;
        }
    }

    private function summary(array $row): array
    {
        $p = self::payload($row);
        $exception = (string) ($row['exception'] ?? '');
        $nl = strpos($exception, "\n");

        return [
            'id' => Agent::text((string) ($row['id'] ?? ''), 64),
            'uuid' => Agent::text((string) ($p['uuid'] ?? ($row['uuid'] ?? '')), 64),
            'connection' => Agent::text((string) ($row['connection'] ?? ''), 100),
            'queue' => Agent::text((string) ($row['queue'] ?? ''), 200),
            'class' => Agent::text((string) ($p['displayName'] ?? ($p['job'] ?? '')), 200),
            'exception' => Agent::text($nl === false ? $exception : substr($exception, 0, $nl), self::EXCEPTION_LINE),
            'failed_at' => self::failedAt($row),
            'attempts' => is_int($p['attempts'] ?? null) ? $p['attempts'] : null,
        ];
    }

    private function matches(array $row, array $req): bool
    {
        $p = self::payload($row);
        $want = function (string $key) use ($req): ?string {
            return is_string($req[$key] ?? null) && $req[$key] !== '' ? $req[$key] : null;
        };
        $at = self::failedAt($row);

        if (($q = $want('queue')) !== null && (string) ($row['queue'] ?? '') !== $q) {
            return false;
        }

        if (($c = $want('class')) !== null && (string) ($p['displayName'] ?? '') !== $c) {
            return false;
        }

        if (($u = $want('uuid')) !== null && (string) ($p['uuid'] ?? '') !== $u && (string) ($row['id'] ?? '') !== $u) {
            return false;
        }

        if (($t = $want('tag')) !== null && ! in_array($t, (array) ($p['tags'] ?? []), true)) {
            return false;
        }

        if (($x = $want('text')) !== null && stripos((string) ($row['payload'] ?? ''), $x) === false
            && stripos((string) ($row['exception'] ?? ''), $x) === false) {
            return false;
        }

        if (is_int($req['since'] ?? null) && ($at === null || $at < $req['since'])) {
            return false;
        }

        return ! (is_int($req['until'] ?? null) && ($at === null || $at > $req['until']));
    }
}
