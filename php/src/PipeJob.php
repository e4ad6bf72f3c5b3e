<?php

namespace Qpool\Laravel;

use Illuminate\Container\Container;
use Illuminate\Contracts\Queue\Job as JobContract;
use Illuminate\Queue\Jobs\Job;

/**
 * The job handed to Laravel for one qpool request: shaped like
 * Illuminate\Queue\Jobs\RedisJob (same raw body, id, attempts, queue and
 * connection name), but delete(), release() and fail() only record what
 * happened; qpool owns Redis and acts on the response.
 *
 * fail() still runs the framework's failure path (Job::fail: the job's
 * failed() hook and the JobFailed event, whose listener writes the
 * failed_jobs row), exactly as under queue:work.
 */
class PipeJob extends Job implements JobContract
{
    /** @var string the payload exactly as popped */
    protected $job;

    /** @var array|null */
    protected $decoded;

    /** @var string|null */
    protected $jobId;

    /** @var int */
    protected $attemptNumber;

    /** @var int|null seconds passed to release() */
    public $releaseDelay;

    /** @var bool JobFailed was dispatched for this job (its failure path ran) */
    public $failedEventSeen = false;

    /** @var \Throwable|null the exception JobFailed carried */
    public $failedEventException;

    public function __construct(Container $container, string $raw, ?string $jobId, int $attempts, string $connectionName, string $queue)
    {
        $this->container = $container;
        $this->job = $raw;
        $this->jobId = ($jobId === null || $jobId === '') ? null : $jobId;
        $this->attemptNumber = $attempts;
        $this->connectionName = $connectionName;
        $this->queue = $queue;

        $decoded = json_decode($raw, true);
        $this->decoded = is_array($decoded) ? $decoded : null;
    }

    /** RedisJob::getRawBody(): the payload as popped (attempts not incremented). */
    public function getRawBody()
    {
        return $this->job;
    }

    /** RedisJob::getJobId(): the payload's id. */
    public function getJobId()
    {
        return $this->jobId;
    }

    /** RedisJob::attempts(): this attempt, counting from 1. */
    public function attempts()
    {
        return $this->attemptNumber;
    }

    /** The decoded payload (cached; the raw body never changes). */
    public function payload()
    {
        return $this->decoded;
    }

    // delete() is Job::delete(): it only sets the flag.

    public function release($delay = 0)
    {
        parent::release($delay);

        $seconds = method_exists($this, 'secondsUntil') ? $this->secondsUntil($delay) : $delay;

        $this->releaseDelay = max(0, (int) $seconds);
    }

    /**
     * Called by the JobFailed listener the handler registers.
     */
    public function recordFailedEvent($exception): void
    {
        if (! $this->failedEventSeen) {
            $this->failedEventSeen = true;
            $this->failedEventException = $exception;
        }
    }
}
