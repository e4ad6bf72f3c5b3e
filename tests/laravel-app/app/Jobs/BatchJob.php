<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use Illuminate\Bus\Batchable;

/**
 * One job of a batch (Bus::batch); with $fail = true it throws (tries 1),
 * only once when FAIL_ONCE_DIR is set (a retried job then succeeds); it
 * first sleeps $sleep seconds (0: none).
 */
class BatchJob implements ShouldQueue
{
    use Batchable, Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tries = 1;

    public $tag;

    public $fail;

    public $sleep;

    public function __construct(?string $tag = null, bool $fail = false, int $sleep = 0)
    {
        $this->tag = $tag;
        $this->fail = $fail;
        $this->sleep = $sleep;
    }

    public function handle()
    {
        if ($this->sleep) {
            sleep($this->sleep);
        }

        $this->marker(['batch' => $this->batchId !== null]);

        if ($this->fail) {
            $dir = getenv('FAIL_ONCE_DIR');
            $mark = $dir ? $dir.'/'.md5((string) $this->tag.'|'.$this->batchId) : null;

            if ($mark === null || ! file_exists($mark)) {
                if ($mark !== null) {
                    touch($mark);
                }

                throw new \RuntimeException('batch job fails');
            }
        }
    }

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
