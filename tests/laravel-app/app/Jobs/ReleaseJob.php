<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/**
 * Releases itself for 5 s on attempt 1; later attempts return.
 * A release counts as an attempt, so $tries must be > 1 (queue:work's
 * default --tries=1 would fail attempt 2 with MaxAttemptsExceededException).
 */
class ReleaseJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tries = 3;

    public $tag;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
    }

    public function handle()
    {
        $this->marker();

        if ($this->attempts() === 1) {
            $this->release(5);
        }
    }
}
