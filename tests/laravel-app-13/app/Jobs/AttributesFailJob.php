<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\Attributes\Backoff;
use Illuminate\Queue\Attributes\MaxExceptions;
use Illuminate\Queue\Attributes\Tries;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** 13.x attributes: 4 tries, 1 s backoff, but #[MaxExceptions(2)]: fails on its second exception. */
#[Tries(4)]
#[Backoff(1)]
#[MaxExceptions(2)]
class AttributesFailJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tag;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
    }

    public function handle()
    {
        $this->marker();

        throw new \RuntimeException('attributes job fails');
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
