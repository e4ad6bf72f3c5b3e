<?php

namespace App\Handlers;

use App\Support\Marker;

/**
 * Target of string jobs: Queue::push('App\Handlers\StringHandler@handle', $data, $queue).
 * A string job must delete itself; the worker does not.
 */
class StringHandler
{
    public function handle($job, $data)
    {
        Marker::write([
            'job' => 'string',
            'tag' => is_array($data) ? ($data['tag'] ?? null) : null,
            'data' => $data,
            'attempt' => $job->attempts(),
            'pid' => getmypid(),
            'time' => microtime(true),
        ]);

        $job->delete();
    }
}
