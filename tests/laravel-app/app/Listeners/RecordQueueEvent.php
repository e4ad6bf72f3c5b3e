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
            'attempts' => $job ? $job->attempts() : null,
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
}
