<?php

namespace Qpool\Laravel;

use Throwable;

/**
 * The app agent: a long-lived process the zygote forks when qpool's master
 * asks for it ("agent 1 MASTERPID" with one stream socket). It holds the
 * booted app and answers what the C side cannot read itself, through the
 * app's own drivers: one JSON request per line, one JSON reply per line,
 * with the request's id (src/master/agent_wire.h is the master's side, and
 * checks every reply). Its first line, unasked, is its hello:
 *
 *   {"id":0,"ok":true,"op":"hello","pid":123,"laravel":"8.83.27"}
 *
 * Ops:
 *   signals  {"id":N,"op":"signals","restart_key":"illuminate:queue:restart","queues":["redis:default"]}
 *            -> {"id":N,"ok":true,"restart":"1764380000"|null,"paused_all":false,"paused":[false]}
 *            Laravel's queue:restart stamp and queue:pause keys, read through
 *            the app's default cache store (file, database, memcached,
 *            dynamodb, redis...), as queue:work reads them.
 *   sizes    {"id":N,"op":"sizes","connection":"database","queues":["default"]}
 *            -> {"id":N,"ok":true,"sizes":[{"ready":12,"delayed":3,"reserved":1}]}
 *            Each queue's size through the app's queue connection: ready,
 *            delayed and reserved where the driver says them apart
 *            (pendingSize / delayedSize / reservedSize, Laravel 11+; a
 *            beanstalkd connection's tube stats before), else ready is its
 *            size() and the others null.
 *   batches  {"id":N,"op":"batches","limit":50}
 *            -> {"id":N,"ok":true,"batches":[{"id":"...","name":"...","total":10,"pending":2,"failed":2,
 *                "created_at":1764380000,"finished_at":null,"cancelled_at":null,"failed_ids":["uuid"]}]}
 *            The newest batches in the app's own Illuminate\Bus\BatchRepository
 *            (job_batches by default; Laravel 8+), at most 50, their failed
 *            job ids at most 100 each; cut to fit one reply line (fewer
 *            failed ids each, then fewer batches: fit()).
 *   batch-failed {"id":N,"op":"batch-failed","batch":"..."}
 *            -> {"id":N,"ok":true,"batch":"...","held":["uuid"],"missing":["uuid"],"failer_uuids":true}
 *            The batch's failed jobs the app's failer holds, and those it
 *            does not; failer_uuids: the failer keeps jobs by uuid, so a
 *            missing one was retried or forgotten in the app (the master
 *            forgets qpool's stale record), else the master retries the
 *            missing ones from qpool's failed store.
 *   batch-retry {"id":N,"op":"batch-retry","batch":"...","jobs":["uuid"]}
 *            -> {"id":N,"ok":true,"batch":"...","retried":["uuid"],"missing":["uuid"]}
 *            What queue:retry-batch does, for the jobs asked: each pushed
 *            back as the app's queue:retry does (batchRetry says how the
 *            order differs).
 *   failed, failed-show, failed-retry, failed-forget: the app's failer, as
 *            queue:failed, queue:retry and queue:forget (AgentFailed.php);
 *            failed-retry also says "not_done": the ids it left for want of
 *            time (failedRetry).
 * An op it does not know, or one that throws: {"id":N,"ok":false,"error":"..."}.
 *
 * It exits on the end of its socket, when its zygote goes (the parent-death
 * signal), on a request line longer than it takes, and by SIGALRM when one
 * request takes longer than REQUEST_TIMEOUT (a cache that hangs): the master
 * asks its zygote for a new one.
 */
final class Agent
{
    public const LINE_MAX = 65536;

    /** The master drops an agent silent for 5 s at least: one stuck longer is gone. */
    private const REQUEST_TIMEOUT = 5;

    /**
     * A failed-retry starts no job after this many seconds of its request
     * (the rest are said "not_done", their rows kept): what one push and its
     * forget may take is left of REQUEST_TIMEOUT.
     */
    private const RETRY_BUDGET = 3.0;

    private const VALUE_MAX = 256;

    /** A batches list at most this long, so that its reply line fits LINE_MAX. */
    private const LIST_MAX = 60000;

    public const JSON_FLAGS = JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE;

    /** @var object the booted application */
    private $app;

    /** @var resource the stream socket to the master */
    private $io;

    /** @var int the zygote that forked it: when getppid() says another, it has gone */
    private $parent;

    /** @var float when the request being answered came (microtime) */
    private $started = 0.0;

    public function __construct($app, $io, int $parent)
    {
        $this->app = $app;
        $this->io = $io;
        $this->parent = $parent;
    }

    public function run(): int
    {
        $pool = (string) getenv('QPOOL_POOL');
        @cli_set_process_title('qpool agent: pool '.$pool);
        stream_set_blocking($this->io, true);

        if (! $this->reply(['id' => 0, 'ok' => true, 'op' => 'hello', 'pid' => getmypid(),
            'laravel' => (string) $this->app->version()])) {
            return 0;
        }

        while (true) {
            $read = [$this->io];
            $write = $except = null;
            $ready = @stream_select($read, $write, $except, 1);

            if (posix_getppid() !== $this->parent) {
                return 0; // the zygote has gone
            }

            if ($ready === false || $ready === 0) {
                continue;
            }

            $line = fgets($this->io, self::LINE_MAX + 1);

            if ($line === false || $line === '') {
                return 0; // the master closed its end
            }

            if (substr($line, -1) !== "\n") {
                Protocol::log('agent: a request line longer than '.self::LINE_MAX.' bytes; exiting');

                return 1;
            }

            $this->started = microtime(true);
            pcntl_alarm(self::REQUEST_TIMEOUT);
            $ok = $this->reply($this->answer($line));
            pcntl_alarm(0);

            if (! $ok) {
                return 0;
            }
        }
    }

    /** One line to the master; false when it cannot be written (the master has gone). */
    private function reply(array $reply): bool
    {
        $json = json_encode($reply, self::JSON_FLAGS);

        if ($json === false) {
            $json = json_encode(['id' => $reply['id'] ?? 0, 'ok' => false, 'error' => 'the reply cannot be encoded']);
        }

        $json .= "\n";

        for ($done = 0; $done < strlen($json); $done += $n) {
            $n = @fwrite($this->io, substr($json, $done));

            if (! $n) {
                return false;
            }
        }

        return true;
    }

    private function answer(string $line): array
    {
        $req = json_decode($line, true, 8);
        $id = is_array($req) && is_int($req['id'] ?? null) && $req['id'] > 0 ? $req['id'] : 0;

        if ($id === 0) {
            return ['id' => 0, 'ok' => false, 'error' => 'a request without a valid id'];
        }

        try {
            switch ($req['op'] ?? null) {
                case 'signals':
                    return ['id' => $id, 'ok' => true] + $this->signals($req);
                case 'sizes':
                    return ['id' => $id, 'ok' => true] + $this->sizes($req);
                case 'batches':
                    return ['id' => $id, 'ok' => true] + $this->batches($req);
                case 'batch-failed':
                    return ['id' => $id, 'ok' => true] + $this->batchFailed($req);
                case 'batch-retry':
                    return ['id' => $id, 'ok' => true] + $this->batchRetry($req);
                case 'failed':
                    return ['id' => $id, 'ok' => true] + (new AgentFailed($this->app))->list($req);
                case 'failed-show':
                    return ['id' => $id, 'ok' => true] + (new AgentFailed($this->app))->show($req);
                case 'failed-retry':
                    return ['id' => $id, 'ok' => true] + $this->failedRetry($req);
                case 'failed-forget':
                    return ['id' => $id, 'ok' => true] + (new AgentFailed($this->app))->forget($req);
                default:
                    return ['id' => $id, 'ok' => false, 'error' => 'unknown op'];
            }
        } catch (Throwable $e) {
            return ['id' => $id, 'ok' => false,
                'error' => substr(get_class($e).': '.$e->getMessage(), 0, 200)];
        }
    }

    /** queue:restart's stamp and the queue:pause keys, through the app's cache store. */
    private function signals(array $req): array
    {
        $store = $this->app['cache']->store();
        $key = $req['restart_key'] ?? null;
        $restart = is_string($key) && $key !== '' ? self::stamp($store->get($key)) : null;
        $queues = is_array($req['queues'] ?? null) ? array_slice($req['queues'], 0, 30) : [];
        $paused = [];

        foreach ($queues as $q) {
            $paused[] = is_string($q) && (bool) $store->get('illuminate:queue:paused:'.$q);
        }

        return ['restart' => $restart, 'paused_all' => $queues !== [] && (bool) $store->get('illuminate:queues:paused'),
            'paused' => $paused];
    }

    /** Each queue's size through the app's queue connection (null: the app's default connection). */
    private function sizes(array $req): array
    {
        $name = $req['connection'] ?? null;
        $queue = $this->app['queue']->connection(is_string($name) && $name !== '' ? $name : null);
        $queues = is_array($req['queues'] ?? null) ? array_slice($req['queues'], 0, 30) : [];
        $sizes = [];

        foreach ($queues as $q) {
            $q = is_string($q) ? $q : '';

            if (method_exists($queue, 'pendingSize')) {
                $sizes[] = ['ready' => max(0, (int) $queue->pendingSize($q)),
                    'delayed' => max(0, (int) $queue->delayedSize($q)), 'reserved' => max(0, (int) $queue->reservedSize($q))];
            } elseif ($queue instanceof \Illuminate\Queue\BeanstalkdQueue) {
                $sizes[] = self::tubeSizes($queue->getPheanstalk(), (string) $queue->getQueue($q !== '' ? $q : null));
            } else {
                $sizes[] = ['ready' => max(0, (int) $queue->size($q)), 'delayed' => null, 'reserved' => null];
            }
        }

        return ['sizes' => $sizes];
    }

    /**
     * A beanstalkd tube's sizes from its stats (stats-tube), through the
     * connection's own Pheanstalk: its size() (before Laravel 11) is the
     * ready count alone, and fails for a tube beanstalkd does not have (it
     * drops an empty one nobody uses), which holds no jobs.
     */
    private static function tubeSizes($pheanstalk, string $tube): array
    {
        try {
            $stats = $pheanstalk->statsTube($tube);
        } catch (\Pheanstalk\Exception\ServerException $e) {
            if (strpos($e->getMessage(), 'NOT_FOUND') === false) {
                throw $e;
            }

            return ['ready' => 0, 'delayed' => 0, 'reserved' => 0];
        }

        return ['ready' => max(0, (int) $stats['current-jobs-ready']),
            'delayed' => max(0, (int) $stats['current-jobs-delayed']),
            'reserved' => max(0, (int) $stats['current-jobs-reserved'])];
    }

    /** The app's batch repository; an app without one (before Laravel 8) says so. */
    private function batchRepository()
    {
        $contract = 'Illuminate\\Bus\\BatchRepository';

        if (! interface_exists($contract) || ! $this->app->bound($contract)) {
            throw new \RuntimeException('this app has no job batches (Laravel 8 or later keeps them)');
        }

        return $this->app->make($contract);
    }

    /** The newest batches, newest first. */
    private function batches(array $req): array
    {
        $limit = is_int($req['limit'] ?? null) ? max(1, min(50, $req['limit'])) : 50;
        $out = [];

        foreach ($this->batchRepository()->get($limit, null) as $batch) {
            $out[] = ['id' => (string) $batch->id, 'name' => self::text((string) $batch->name, 200),
                'total' => max(0, (int) $batch->totalJobs), 'pending' => max(0, (int) $batch->pendingJobs),
                'failed' => max(0, (int) $batch->failedJobs), 'created_at' => self::time($batch->createdAt),
                'finished_at' => self::time($batch->finishedAt), 'cancelled_at' => self::time($batch->cancelledAt),
                'failed_ids' => array_values(array_map('strval', array_slice((array) $batch->failedJobIds, 0, 100)))];
        }

        return ['batches' => self::fit($out)];
    }

    /**
     * The list cut to fit one reply line (the master takes LINE_MAX bytes at
     * most, and drops an agent that sends more): fewer failed job ids per
     * batch first (their "failed" count still says all), then the oldest
     * batches left out.
     */
    private static function fit(array $out): array
    {
        for ($cap = 100; strlen((string) json_encode($out, self::JSON_FLAGS)) > self::LIST_MAX;) {
            if ($cap === 0) {
                array_pop($out);
                continue;
            }

            $cap = intdiv($cap, 2);

            foreach ($out as $i => $batch) {
                $out[$i]['failed_ids'] = array_slice($batch['failed_ids'], 0, $cap);
            }
        }

        return $out;
    }

    /** The batch of a request, and its failed job ids (at most 100). */
    private function batchOf(array $req): array
    {
        $id = $req['batch'] ?? null;

        if (! is_string($id) || $id === '') {
            throw new \InvalidArgumentException('no batch id');
        }

        $batch = $this->batchRepository()->find($id);

        if (! $batch) {
            throw new \RuntimeException('no batch '.self::text($id, 64));
        }

        $ids = array_slice(array_values(array_map('strval', (array) $batch->failedJobIds)), 0, 100);

        if ($ids === []) {
            throw new \RuntimeException('the batch has no failed jobs');
        }

        return [$batch, $ids];
    }

    /** Which failed jobs of the batch the app's failer holds (nothing changes). */
    private function batchFailed(array $req): array
    {
        [$batch, $ids] = $this->batchOf($req);
        $failer = $this->app['queue.failer'];
        $held = $missing = [];

        foreach ($ids as $jobId) {
            if ($failer->find($jobId) === null) {
                $missing[] = $jobId;
            } else {
                $held[] = $jobId;
            }
        }

        return ['batch' => (string) $batch->id, 'held' => $held, 'missing' => $missing,
            'failer_uuids' => self::byUuid($failer)];
    }

    /**
     * Does the failer keep failed jobs by their uuid, so that a job it does
     * not find is one the app retried or forgot (queue:retry, queue:forget)?
     * Not the null failer, nor the plain database one (ids, not uuids), nor
     * one this agent does not know: there the master retries what the app
     * does not hold from qpool's own failed store.
     */
    private static function byUuid($failer): bool
    {
        foreach (['DatabaseUuidFailedJobProvider', 'DynamoDbFailedJobProvider', 'FileFailedJobProvider'] as $class) {
            if (get_class($failer) === 'Illuminate\\Queue\\Failed\\'.$class) {
                return true;
            }
        }

        return false;
    }

    /**
     * queue:retry-batch for the jobs asked (those of the batch's failed jobs
     * the failer holds): each pushed back as the app's own queue:retry
     * pushes it (RetryCommand::retryJob: attempts 0, retryUntil anew;
     * JobRetryRequested raised). In three passes: the events (a listener
     * that throws or hangs changes nothing), then every row forgotten,
     * then the pushes, with no write to the app's database after the first
     * push: a pushed job may run at once, and on SQLite its batch update
     * fails ("database is locked") when the agent writes meanwhile; nor
     * must it meet its old row if it fails again (the same uuid). An agent
     * killed after the forgets (its alarm on a slow database, a reload)
     * leaves the jobs it had not pushed in qpool's failed store: the master
     * forgets qpool's record of a job only once it is said retried. A job
     * whose push throws is logged to the failer again and said missing.
     */
    private function batchRetry(array $req): array
    {
        [$batch, $ids] = $this->batchOf($req);
        $asked = is_array($req['jobs'] ?? null) ? $req['jobs'] : $ids;
        [$retried, $missing] = $this->retryJobs(array_values(array_intersect($ids, $asked)));

        return ['batch' => (string) $batch->id, 'retried' => $retried, 'missing' => $missing];
    }

    /**
     * queue:retry for the failed jobs asked (`qpool failed retry --app`), in
     * queue:retry's own order for each job: JobRetryRequested, the push, and
     * only once the push succeeded the forget. An agent killed on the way
     * (a reload, its alarm) leaves at worst one job pushed whose row stays
     * (a duplicate), never a job in neither place: no other record backs
     * these up (batchRetry's has qpool's failed store). No job is started
     * after RETRY_BUDGET: those left, and one whose push throws, keep their
     * rows and are said not_done.
     */
    private function failedRetry(array $req): array
    {
        $failer = $this->app['queue.failer'];
        $command = $this->retryCommand();
        $out = ['retried' => [], 'missing' => [], 'not_done' => []];

        foreach (AgentFailed::ids($req) as $jobId) {
            if ($out['not_done'] !== [] || microtime(true) - $this->started > self::RETRY_BUDGET) {
                $out['not_done'][] = $jobId;
                continue;
            }

            $job = $failer->find($jobId);
            $out[$job === null ? 'missing' : $this->retryOne($failer, $command, $jobId, $job)][] = $jobId;
        }

        return $out;
    }

    /** One failed job pushed back, then forgotten: "retried", or "not_done" when its push throws. */
    private function retryOne($failer, $command, string $jobId, $job): string
    {
        try {
            if (class_exists('Illuminate\\Queue\\Events\\JobRetryRequested')) {
                $this->app['events']->dispatch(new \Illuminate\Queue\Events\JobRetryRequested($job));
            }

            $command->pushBack($job);
        } catch (Throwable $e) {
            Protocol::log('agent: retry of failed job '.$jobId.' failed: '.$e->getMessage());

            return 'not_done'; // its row stays
        }

        try {
            $failer->forget($jobId);
        } catch (Throwable $e) {
            Protocol::log('agent: failed job '.$jobId.' was pushed back, but its row stays: '.$e->getMessage());
        }

        return 'retried';
    }

    /** batchRetry's jobs of these ids pushed back, in its three passes: [retried, missing]. */
    private function retryJobs(array $jobIds): array
    {
        $failer = $this->app['queue.failer'];
        $found = $missing = [];

        foreach ($jobIds as $jobId) {
            $job = $failer->find($jobId);

            if ($job === null) {
                $missing[] = $jobId;
            } else {
                $found[$jobId] = $job;
            }
        }

        foreach ($found as $job) {
            if (class_exists('Illuminate\\Queue\\Events\\JobRetryRequested')) {
                $this->app['events']->dispatch(new \Illuminate\Queue\Events\JobRetryRequested($job));
            }
        }

        foreach (array_keys($found) as $jobId) {
            try {
                $failer->forget($jobId);
            } catch (Throwable $e) {
                Protocol::log('agent: retry of failed job '.$jobId.' failed: '.$e->getMessage());
                unset($found[$jobId]); // its row stays
                $missing[] = $jobId;
            }
        }

        return [$this->pushAll($failer, $found, $missing), $missing];
    }

    /** The jobs pushed back; one whose push throws is logged to the failer again, and missing. */
    private function pushAll($failer, array $found, array &$missing): array
    {
        $command = $this->retryCommand();
        $retried = [];

        foreach ($found as $jobId => $job) {
            try {
                $command->pushBack($job);
                $retried[] = $jobId;
            } catch (Throwable $e) {
                Protocol::log('agent: retry of failed job '.$jobId.' failed: '.$e->getMessage());
                $failer->log($job->connection, $job->queue, $job->payload, $e);
                $missing[] = $jobId;
            }
        }

        return $retried;
    }

    /** The app's own queue:retry, to push a failed job back as it does. */
    private function retryCommand()
    {
        $command = new class extends \Illuminate\Queue\Console\RetryCommand {
            public function pushBack($job): void
            {
                $this->retryJob($job);
            }
        };
        $command->setLaravel($this->app);

        return $command;
    }

    /** A time as whole seconds since the epoch, or null. */
    private static function time($t): ?int
    {
        if ($t instanceof \DateTimeInterface) {
            return $t->getTimestamp();
        }

        return is_numeric($t) ? (int) $t : null;
    }

    /** Text cut to $max bytes at a character, invalid UTF-8 replaced. */
    public static function text(string $s, int $max): string
    {
        if (! preg_match('//u', $s)) {
            $s = function_exists('mb_convert_encoding') ? mb_convert_encoding($s, 'UTF-8', 'UTF-8')
                : (string) preg_replace('/[\x80-\xff]/', '?', $s);
        }

        if (strlen($s) <= $max) {
            return $s;
        }

        $s = substr($s, 0, $max);

        while ($s !== '' && ! preg_match('//u', $s)) {
            $s = substr($s, 0, -1);
        }

        return $s;
    }

    /** A restart value as a short string (queue:restart stores a timestamp), or null when not set. */
    private static function stamp($value): ?string
    {
        if ($value === null) {
            return null;
        }

        $s = is_scalar($value) ? (string) $value : serialize($value);

        return strlen($s) <= self::VALUE_MAX && preg_match('//u', $s) ? $s : hash('sha256', $s);
    }
}
