<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** retryUntil already past when dispatched: failed when popped, handle() never runs. */
class ExpiredUntilJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tag;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
    }

    public function retryUntil()
    {
        return now()->subMinute();
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
