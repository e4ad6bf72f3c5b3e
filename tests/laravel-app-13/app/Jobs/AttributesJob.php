<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\Attributes\Backoff;
use Illuminate\Queue\Attributes\Timeout;
use Illuminate\Queue\Attributes\Tries;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** 13.x job attributes instead of properties; releases itself for --arg seconds (default 4). */
#[Tries(5)]
#[Backoff([3, 7])]
#[Timeout(9)]
class AttributesJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tag;

    public $release;

    public function __construct(?string $tag = null, int $release = 4)
    {
        $this->tag = $tag;
        $this->release = $release;
    }

    public function handle()
    {
        $this->marker();

        if ($this->release > 0) {
            $this->release($this->release);
        }
    }
}
