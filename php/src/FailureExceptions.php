<?php

namespace Qpool\Laravel;

use ReflectionClass;
use ReflectionMethod;
use RuntimeException;
use Throwable;

/**
 * Builds the Throwable a `failed` request hands to Job::fail(), i.e. what
 * the running Laravel version's Worker would have passed. Feature
 * detection only, no version strings.
 */
final class FailureExceptions
{
    const MAX_ATTEMPTS = 'Illuminate\Queue\MaxAttemptsExceededException';
    const TIMEOUT = 'Illuminate\Queue\TimeoutExceededException';

    /**
     * @param  \Illuminate\Contracts\Queue\Job  $job
     * @param  array  $request  the `failed` request
     * @param  Throwable|null  $previous  what the same job threw in the immediately preceding `job` request
     */
    public static function forRequest($job, array $request, ?Throwable $previous): Throwable
    {
        switch ((string) ($request['reason'] ?? '')) {
            case 'max_tries':
            case 'retry_until':
            case 'max_exceptions':
                // Worker::handleJobException fails the job with what it threw.
                return $previous ?: self::fromDescription($job, $request['exception'] ?? null);

            case 'timeout':
            case 'fail_on_timeout':
                return self::timedOut($job);

            case 'already_exceeded':
                return self::maxAttempts($job);

            default: // job_failed, or a reason this handler does not know
                return self::fromDescription($job, $request['exception'] ?? null);
        }
    }

    /**
     * What the SIGALRM handler of Worker::registerTimeoutHandler builds:
     * 10.10+ TimeoutExceededException ("<name> has timed out."), before that
     * MaxAttemptsExceededException with the long "may have previously timed
     * out" message (8.x).
     */
    public static function timedOut($job): Throwable
    {
        $name = self::name($job);

        if (class_exists(self::TIMEOUT)) {
            $class = self::TIMEOUT;

            if (self::declaresForJob($class)) {
                return $class::forJob($job);
            }

            return self::withJob(new $class($name.' has timed out.'), $job);
        }

        $class = self::MAX_ATTEMPTS;

        return new $class($name.' has been attempted too many times or run too long. The job may have previously timed out.');
    }

    /**
     * What Worker::markJobAsFailedIfAlreadyExceedsMaxAttempts builds:
     * MaxAttemptsExceededException::forJob() where it exists ("<name> has
     * been attempted too many times."), the short message since the timeout
     * exception was split off (10.10), the long one before (8.x).
     */
    public static function maxAttempts($job): Throwable
    {
        $class = self::MAX_ATTEMPTS;
        $name = self::name($job);

        if (method_exists($class, 'forJob')) {
            return $class::forJob($job);
        }

        if (class_exists(self::TIMEOUT)) {
            return self::withJob(new $class($name.' has been attempted too many times.'), $job);
        }

        return new $class($name.' has been attempted too many times or run too long. The job may have previously timed out.');
    }

    /**
     * An exception rebuilt from the request's {"class","message","text"}:
     * that class when it exists and takes a message, else RuntimeException.
     * qpool's own timeout / max-attempts classes map to what this Laravel
     * version builds for them.
     */
    public static function fromDescription($job, $description): Throwable
    {
        $class = is_array($description) && is_string($description['class'] ?? null) ? ltrim($description['class'], '\\') : '';
        $message = is_array($description) && is_scalar($description['message'] ?? null) ? (string) $description['message'] : '';

        if ($class === self::TIMEOUT) {
            return self::timedOut($job);
        }

        if ($class === self::MAX_ATTEMPTS) {
            return self::maxAttempts($job);
        }

        if ($class !== '') {
            try {
                if (class_exists($class) && is_subclass_of($class, Throwable::class)
                    && (new ReflectionClass($class))->isInstantiable()) {
                    return new $class($message);
                }
            } catch (Throwable $e) {
                // not constructible with just a message
            }
        }

        return new RuntimeException($message);
    }

    private static function name($job): string
    {
        try {
            return (string) $job->resolveName();
        } catch (Throwable $e) {
            return (string) ($job->payload()['displayName'] ?? '?');
        }
    }

    private static function declaresForJob(string $class): bool
    {
        if (! method_exists($class, 'forJob')) {
            return false;
        }

        return (new ReflectionMethod($class, 'forJob'))->getDeclaringClass()->getName() === $class;
    }

    private static function withJob(Throwable $e, $job): Throwable
    {
        if (property_exists($e, 'job')) {
            $e->job = $job;
        }

        return $e;
    }
}
