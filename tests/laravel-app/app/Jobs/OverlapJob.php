<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use Illuminate\Queue\Middleware\WithoutOverlapping;

/**
 * WithoutOverlapping('parity') releasing after 1 s, 2 tries. With the lock
 * held elsewhere (fixture:parity holds it) it is released twice, then
 * failed as having been attempted too many times, without handle() running.
 */
class OverlapJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tries = 2;

    public $tag;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
    }

    public function middleware()
    {
        return [(new WithoutOverlapping('parity'))->releaseAfter(1)];
    }

    public function handle()
    {
        $this->marker();
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
