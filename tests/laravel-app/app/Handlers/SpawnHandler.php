<?php

namespace App\Handlers;

use App\Support\Marker;

/**
 * String job (App\Handlers\SpawnHandler@handle) that starts a background
 * `sleep SECONDS` and returns at once: the tests look at the descriptors
 * that process inherited.
 */
class SpawnHandler
{
    public function handle($job, $data)
    {
        $seconds = (string) (float) ($data['seconds'] ?? 30);
        exec('sleep '.$seconds.' > /dev/null 2>&1 &');
        Marker::write(['job' => 'spawn', 'seconds' => $seconds, 'attempt' => $job->attempts(), 'pid' => getmypid()]);
        $job->delete();
    }
}
