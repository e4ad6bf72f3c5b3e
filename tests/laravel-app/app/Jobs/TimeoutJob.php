<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Sleeps past its 1 s timeout; the worker kills itself (SIGKILL). */
class TimeoutJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $timeout = 1;

    public $tries = 2;

    public $tag;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
    }

    public function handle()
    {
        $this->marker();

        sleep(10);
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
