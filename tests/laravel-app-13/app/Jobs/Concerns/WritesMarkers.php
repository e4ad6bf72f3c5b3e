<?php

namespace App\Jobs\Concerns;

use App\Support\Marker;

trait WritesMarkers
{
    /**
     * Marker written when handle() runs.
     */
    protected function marker(array $extra = []): void
    {
        Marker::write(array_merge([
            'job' => class_basename($this),
            'tag' => $this->tag ?? null,
            'attempt' => $this->attempts(),
            'pid' => getmypid(),
            'time' => microtime(true),
        ], $extra));
    }

    /**
     * Marker written by the failed() hook.
     */
    protected function failedMarker(?\Throwable $e): void
    {
        Marker::write([
            'event' => 'failed_hook',
            'job' => class_basename($this),
            'tag' => $this->tag ?? null,
            'class' => $e ? get_class($e) : null,
            'message' => $e ? $e->getMessage() : null,
            'pid' => getmypid(),
            'time' => microtime(true),
        ]);
    }
}
