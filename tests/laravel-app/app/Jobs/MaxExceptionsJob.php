<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Throws every time; fails after 2 exceptions although $tries is 10. */
class MaxExceptionsJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tries = 10;

    public $maxExceptions = 2;

    public $backoff = 0;

    public $tag;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
    }

    public function handle()
    {
        $this->marker();

        throw new \RuntimeException('max exceptions fails');
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
