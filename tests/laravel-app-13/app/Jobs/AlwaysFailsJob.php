<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Throws on every attempt: 3 tries, backoff 1 s then 2 s. */
class AlwaysFailsJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tries = 3;

    public $backoff = [1, 2];

    public $tag;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
    }

    public function handle()
    {
        $this->marker();

        throw new \RuntimeException('always fails');
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
