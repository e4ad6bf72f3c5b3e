<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Throws until retryUntil (dispatch time + 3 s) has passed; backoff 1 s. */
class RetryUntilJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tries = 0;

    public $backoff = 1;

    public $tag;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
    }

    public function retryUntil()
    {
        return now()->addSeconds(3);
    }

    public function handle()
    {
        $this->marker();

        throw new \RuntimeException('retry until fails');
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
