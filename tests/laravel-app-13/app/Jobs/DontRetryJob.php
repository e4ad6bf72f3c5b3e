<?php

namespace App\Jobs;

use App\Exceptions\DontRetryException;
use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** 3 tries, but throws an exception the app marks dontRetry: queue:work fails it on attempt 1. */
class DontRetryJob implements ShouldQueue
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

        throw new DontRetryException('do not retry me');
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
