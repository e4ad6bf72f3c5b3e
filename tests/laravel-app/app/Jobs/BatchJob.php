<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use Illuminate\Bus\Batchable;

/** One job of a batch (Bus::batch); with $fail = true it throws (tries 1). */
class BatchJob implements ShouldQueue
{
    use Batchable, Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tries = 1;

    public $tag;

    public $fail;

    public function __construct(?string $tag = null, bool $fail = false)
    {
        $this->tag = $tag;
        $this->fail = $fail;
    }

    public function handle()
    {
        $this->marker(['batch' => $this->batchId !== null]);

        if ($this->fail) {
            throw new \RuntimeException('batch job fails');
        }
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
