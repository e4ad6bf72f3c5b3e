<?php

namespace Qpool\Laravel;

use Illuminate\Queue\Events\JobExceptionOccurred;
use Illuminate\Queue\Events\JobFailed;
use Throwable;

/**
 * A `pop` request (a pool with app_driver = true): the app's own queue
 * connection pops the next job and Illuminate\Queue\Worker runs it, exactly
 * as one pass of `queue:work` does (Worker::getNextJob, then Worker::runJob:
 * process, tries, backoff, maxExceptions, retryUntil, release, fail, the
 * failer and the queue events). qpool only supervises the process; this
 * reports what happened so that its history, metrics and status go on.
 */
final class AppDriver
{
    /** @var \Illuminate\Foundation\Application */
    private $app;

    /** @var \Illuminate\Queue\Worker|null made on the first request */
    private $worker;

    /** @var Throwable|null what the running job threw (JobExceptionOccurred) */
    private $thrown;

    /** @var Throwable|null what it failed with (JobFailed) */
    private $failedWith;

    /** @var bool a request is running: the listeners record */
    private $running = false;

    /** @var bool a stop (SIGALRM from qpool) came between runs or before the run armed the Worker's timeout */
    private $stopPending = false;

    public function __construct($app)
    {
        $this->app = $app;
        $self = $this;
        $app['events']->listen(JobExceptionOccurred::class, function ($event) use ($self) {
            $self->saw('thrown', $event->exception);
        });
        $app['events']->listen(JobFailed::class, function ($event) use ($self) {
            $self->saw('failedWith', $event->exception);
        });
    }

    /** @internal the event listeners' way in */
    public function saw(string $what, $e): void
    {
        if ($this->running && $e instanceof Throwable) {
            $this->$what = $e;
        }
    }

    /** @var array|null the job a `pop` answered with, until the `run` request: [job, connection, queues, options, poppedAt, attempts] */
    private $held;

    /**
     * `pop`: take the next job from the request's queues (in order) and hold
     * it: {"status":"empty"}, or {"status":"popped","job":{...}}. $quit is
     * set when the Worker says it should stop (a lost connection).
     */
    public function pop(array $request, bool &$quit): array
    {
        $connection = (string) ($request['connection'] ?? '');
        $queues = implode(',', array_map('strval', (array) ($request['queues'] ?? [])));

        if ($connection === '' || $queues === '') {
            throw new \InvalidArgumentException('qpool-handler: a pop request needs "connection" and "queues"');
        }

        $this->awaitStop(); // a stop sent now is for a job that is over: forget it

        $worker = $this->worker();
        $this->held = null;
        $job = $this->call('getNextJob', $this->app['queue']->connection($connection), $queues);
        $quit = $quit || $worker->shouldQuit;

        if ($job === null) {
            return ['status' => 'empty'];
        }

        $poppedAt = microtime(true);
        // read while the job is held: a beanstalkd job asks the server (stats-job), which forgets it once deleted
        $attempts = (int) $job->attempts();
        $this->held = [$job, $connection, $queues, self::options($request), $poppedAt, $attempts];

        if ($quit) { // told to stop meanwhile: run it now, as queue:work finishes the job it has
            return $this->run($quit);
        }

        $timeout = (int) $this->call('timeoutForJob', $job, $this->held[3]);

        // its batch now: a job that then times out or dies sends no answer that could say it
        $batch = Tags::payloadBatch($job->payload());

        return ['status' => 'popped', 'job' => self::describeJob($job, $poppedAt, null, $attempts) + ['timeout' => max(0, $timeout)]
            + ($batch !== null ? ['batch' => $batch] : [])];
    }

    /** Does it hold a popped job, for `run` to run? */
    public function holding(): bool
    {
        return $this->held !== null;
    }

    /** Let go of the popped job without running it: its driver returns it as a lost job. */
    public function forget(): void
    {
        $this->held = null;
    }

    /**
     * `run`: run the job the last `pop` took, as Worker::runJob, with the
     * Worker's timeout handler armed: its outcome and the "job" object.
     */
    public function run(bool &$quit): array
    {
        if ($this->held === null) {
            throw new \LogicException('qpool-handler: a run request without a popped job');
        }

        [$job, $connection, $queues, $options, $poppedAt, $attempts] = $this->held;
        $this->held = null;
        $worker = $this->worker();
        $this->thrown = $this->failedWith = null;
        $this->running = true;
        $started = microtime(true);

        Tags::$command = null; // the last job's, else

        try {
            $this->armTimeout($worker, $connection, $queues, $job, $options);
            $this->guardTimeout($job);
            $this->stopIfPending();
            $this->call('runJob', $job, $connection, $options);
        } finally {
            if (function_exists('pcntl_alarm')) {
                // first, so that no SIGALRM reaches the Worker's handler of a job that is over: qpool
                // sends one to stop the running job ("stop this job"), which may cross its end
                $this->awaitStop(false);
                pcntl_alarm(0); // Worker::resetTimeoutHandler()
            }

            $this->running = false;
        }

        $quit = $quit || $worker->shouldQuit;

        return $this->outcome($job) + ['job' => self::describeJob($job, $poppedAt, (microtime(true) - $started) * 1000, $attempts)]
            + self::tags($job);
    }

    /**
     * Between runs, and in a run until the Worker's timeout handler is armed,
     * SIGALRM (qpool's "stop this job") only records that a stop came. pop()
     * forgets it ($clear: a stop sent before the next job's `pop` is for the
     * last job; qpool sends one for a job only after writing its `run`, or
     * after reading its `popped` when the pop runs it too).
     */
    private function awaitStop(bool $clear = true): void
    {
        if (! function_exists('pcntl_signal')) {
            return;
        }

        $self = $this;
        pcntl_signal(SIGALRM, function () use ($self) {
            $self->stopPending = true;
        });

        if ($clear) {
            pcntl_signal_dispatch();
            $this->stopPending = false;
        }
    }

    /**
     * The Worker's SIGALRM handler runs only while the job is not over: a
     * stop (or the alarm) that comes once the job released itself, was
     * deleted or failed (the listeners runJob calls after a release) leaves
     * it as it is, where Laravel's handler would fail a released job (a
     * failed_jobs row beside the released copy, which runs again).
     */
    private function guardTimeout($job): void
    {
        if (! function_exists('pcntl_signal_get_handler')) {
            return;
        }

        $armed = pcntl_signal_get_handler(SIGALRM);

        if (! is_callable($armed)) {
            return;
        }

        pcntl_signal(SIGALRM, function (...$args) use ($armed, $job) {
            if ($job->isDeleted() || $job->isReleased() || $job->hasFailed()) {
                return;
            }

            $armed(...$args);
        });
    }

    /** A stop that came before the Worker's timeout handler was armed: raise it again, now that it is. */
    private function stopIfPending(): void
    {
        if (! function_exists('pcntl_signal_dispatch')) {
            return;
        }

        pcntl_signal_dispatch();

        if ($this->stopPending) {
            $this->stopPending = false;
            function_exists('posix_kill') ? posix_kill(getmypid(), SIGALRM) : pcntl_alarm(1);
        }
    }

    /** The job's tags (its payload's, else the adapter's, as Horizon makes them), whether it is silenced, its batch id. */
    private static function tags($job): array
    {
        $payload = $job->payload();
        $flags = Tags::flags($payload);
        $tags = isset($payload['tags']) && is_array($payload['tags']) ? $payload['tags'] : Tags::take();

        return ($tags ? ['tags' => array_values($tags)] : []) + $flags;
    }

    /** Call one of the Worker's protected methods (the ones queue:work's loop calls). */
    private function call(string $method, ...$args)
    {
        $worker = $this->worker();
        $call = \Closure::bind(function (string $method, array $args) {
            return $this->$method(...$args);
        }, $worker, get_class($worker));

        return $call($method, $args);
    }

    /**
     * Worker::registerTimeoutHandler(), as queue:work arms it before each
     * job: at the job's timeout (its own, else the pool's) SIGALRM marks it
     * failed if it will exceed its tries or maxExceptions or has
     * failOnTimeout, raises JobTimedOut (10+), and kills this process.
     * 8.x-12.x take ($job, $options), 13.x ($connection, $queue, $job, $options).
     */
    private function armTimeout($worker, string $connection, string $queues, $job, $options): void
    {
        if (! function_exists('pcntl_alarm') || ! method_exists($worker, 'registerTimeoutHandler')) {
            return;
        }

        $params = (new \ReflectionMethod($worker, 'registerTimeoutHandler'))->getNumberOfParameters();

        if ($params >= 4) {
            $this->call('registerTimeoutHandler', $connection, $queues, $job, $options);
        } else {
            $this->call('registerTimeoutHandler', $job, $options);
        }
    }

    /** The Worker queue:work would use, with the cache for maxExceptions (WorkCommand does the same). */
    private function worker()
    {
        if ($this->worker === null) {
            $this->worker = $this->app->make('queue.worker');

            if ($this->app->bound('cache')) {
                $this->worker->setCache($this->app['cache']->driver());
            }

            if (method_exists($this->worker, 'setName')) {
                $this->worker->setName('default');
            }
        }

        return $this->worker;
    }

    /** WorkerOptions from the pool: tries, backoff, timeout (qpool enforces it), memory. */
    private static function options(array $request)
    {
        $o = new \Illuminate\Queue\WorkerOptions();
        $o->maxTries = (int) ($request['tries'] ?? 1);
        $o->backoff = implode(',', array_map('intval', (array) ($request['backoff'] ?? [0]))) ?: '0';
        $o->timeout = (int) ($request['timeout'] ?? 0);
        $o->force = true; // qpool decides about maintenance mode before it asks

        return $o;
    }

    private function outcome($job): array
    {
        $e = $this->failedWith ?? $this->thrown;
        $exception = $e ? ['class' => get_class($e), 'message' => Texts::utf8((string) $e->getMessage()),
            'exception' => Texts::utf8(Texts::of($e))] : [];

        if ($job->hasFailed()) {
            return ['status' => 'failed'] + $exception;
        }

        if ($job->isReleased()) {
            return ['status' => 'released'] + $exception;
        }

        return ['status' => 'done'];
    }

    /**
     * What qpool records for the attempt (docs/handler-protocol.md, "pop").
     * $attempts: the job's, read at the pop (the job may be gone by now).
     */
    private static function describeJob($job, float $poppedAt, ?float $runtime, int $attempts): array
    {
        $payload = $job->payload();

        return [
            'name' => (string) (method_exists($job, 'resolveName') ? $job->resolveName() : ($payload['displayName'] ?? '?')),
            'queue' => (string) $job->getQueue(),
            'id' => Texts::utf8((string) $job->getJobId()),
            'uuid' => is_string($payload['uuid'] ?? null) ? $payload['uuid'] : null,
            'attempts' => $attempts,
            'wait_ms' => self::waitMs($job, $payload, $poppedAt, $attempts),
            'runtime_ms' => $runtime === null ? -1 : round($runtime, 3),
        ];
    }

    /** When it became available, if the driver or the payload says (-1: unknown). */
    private static function waitMs($job, array $payload, float $poppedAt, int $attempts): float
    {
        $available = null;

        if (method_exists($job, 'getJobRecord')) {
            $record = $job->getJobRecord();
            $available = isset($record->available_at) ? (float) $record->available_at : null;
        } elseif (isset($payload['createdAt']) && $attempts === 1) {
            $available = (float) $payload['createdAt'] + (float) ($payload['delay'] ?? 0);
        }

        return $available === null ? -1 : max(0, round(($poppedAt - $available) * 1000, 3));
    }
}

/** Exception text helpers shared with Handler's responses. */
final class Texts
{
    public static function of(Throwable $e): string
    {
        try {
            return (string) $e;
        } catch (Throwable $inner) {
            return get_class($e).': '.$e->getMessage();
        }
    }

    public static function utf8(string $s): string
    {
        return function_exists('mb_convert_encoding') ? (string) mb_convert_encoding($s, 'UTF-8') : $s;
    }
}
