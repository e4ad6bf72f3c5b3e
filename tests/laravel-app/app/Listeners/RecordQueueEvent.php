<?php

namespace App\Listeners;

use App\Support\Marker;
use Illuminate\Contracts\Queue\Job as QueueJob;
use Illuminate\Support\Env;

/**
 * Records JobProcessing, JobProcessed, JobExceptionOccurred and JobFailed
 * (with MARKER_EVENTS=all every queue event: App\Support\QueueEvents). An
 * event without a job (Looping, WorkerStopping, ...) is recorded with
 * "job" null.
 */
class RecordQueueEvent
{
    public function handle($event)
    {
        $enabled = Env::get('MARKER_EVENTS', true);

        if ($enabled === false || $enabled === '0' || $enabled === 0) {
            return;
        }

        $job = property_exists($event, 'job') && $event->job instanceof QueueJob ? $event->job : null;
        // JobQueueing / JobQueued carry the command (or a string job), not a queue job.
        $command = ! $job && property_exists($event, 'job') && is_object($event->job) ? get_class($event->job) : null;

        $record = [
            'event' => class_basename($event),
            'job' => $job ? $job->resolveName() : $command,
            'uuid' => $job ? $job->uuid() : null,
            'attempts' => $job ? self::attempts($job) : null,
            'queue' => $job ? $job->getQueue() : null,
            'connection' => $event->connectionName ?? null,
        ];

        if (property_exists($event, 'exception') && $event->exception instanceof \Throwable) {
            $record['exception'] = get_class($event->exception);
            $record['message'] = $event->exception->getMessage();
        }

        $record['pid'] = getmypid();
        $record['time'] = microtime(true);

        Marker::write($record);
    }

    /**
     * The job's attempts; null where the driver cannot say any more: a
     * beanstalkd job asks the server (stats-job), which has forgotten it
     * once it was deleted (JobProcessed, JobFailed).
     */
    private static function attempts(QueueJob $job): ?int
    {
        try {
            return $job->attempts();
        } catch (\Throwable $e) {
            return null;
        }
    }
}
