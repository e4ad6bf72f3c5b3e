<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** retryUntil an hour away, 1 try: tries do not count; throws on attempts 1 and 2, then succeeds. */
class FlakyUntilJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tries = 1;

    public $backoff = 0;

    public $tag;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
    }

    public function retryUntil()
    {
        return now()->addHour();
    }

    public function handle()
    {
        $this->marker();

        if ($this->attempts() < 3) {
            throw new \RuntimeException('flaky until attempt 3');
        }
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
