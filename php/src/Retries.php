<?php

namespace Qpool\Laravel;

use Throwable;

/**
 * Whether qpool will release a job that threw, decided as qpool decides it
 * (src/policy.c, src/worker.c should_fail: Worker::handleJobException's
 * rules), so that the adapter raises JobReleasedAfterException exactly when
 * queue:work would. qpool makes the decision after the response; this only
 * predicts it, from the request's max_tries, the payload's retryUntil and
 * the maxExceptions counter in the app's cache (read, never written).
 */
final class Retries
{
    public static function willRelease($app, $job, array $request): bool
    {
        if ($job->isDeleted() || $job->isReleased() || $job->hasFailed()) {
            return false;
        }

        if (self::willExceedMaxAttempts($job, (int) ($request['max_tries'] ?? 0))) {
            return false;
        }

        return ! self::willReachMaxExceptions($app, $job);
    }

    /** Worker::markJobAsFailedIfWillExceedMaxAttempts. */
    public static function willExceedMaxAttempts($job, int $maxTries): bool
    {
        $until = $job->retryUntil();

        if ($until) {
            return $until <= time();
        }

        return $maxTries > 0 && $job->attempts() >= $maxTries;
    }

    /** Worker::markJobAsFailedIfWillExceedMaxExceptions: qpool counts this exception after the response. */
    public static function willReachMaxExceptions($app, $job): bool
    {
        $max = $job->maxExceptions();
        $uuid = $job->uuid();

        if ($max === null || $uuid === null) {
            return false;
        }

        try {
            $count = (int) $app['cache']->get('job-exceptions:'.$uuid);
        } catch (Throwable $e) {
            return false;
        }

        return (int) $max <= $count + 1;
    }

    /** Worker::calculateBackoff with the payload's backoff (the pool's list is not in the request: 0). */
    public static function backoff($job): int
    {
        $backoff = method_exists($job, 'backoff') ? $job->backoff() : null;
        $list = explode(',', $backoff === null ? '0' : (string) $backoff);

        return (int) ($list[$job->attempts() - 1] ?? end($list));
    }
}
