<?php

namespace App\Listeners;

use App\Support\Marker;
use Illuminate\Support\Env;

/**
 * Records JobProcessing, JobProcessed, JobExceptionOccurred and JobFailed.
 */
class RecordQueueEvent
{
    public function handle($event)
    {
        $enabled = Env::get('MARKER_EVENTS', true);

        if ($enabled === false || $enabled === '0' || $enabled === 0) {
            return;
        }

        $record = [
            'event' => class_basename($event),
            'job' => $event->job->resolveName(),
            'uuid' => $event->job->uuid(),
            'attempts' => $event->job->attempts(),
            'queue' => $event->job->getQueue(),
            'connection' => $event->connectionName,
        ];

        if (property_exists($event, 'exception') && $event->exception) {
            $record['exception'] = get_class($event->exception);
            $record['message'] = $event->exception->getMessage();
        }

        $record['pid'] = getmypid();
        $record['time'] = microtime(true);

        Marker::write($record);
    }
}
