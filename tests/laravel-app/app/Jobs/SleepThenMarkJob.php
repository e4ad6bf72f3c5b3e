<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/**
 * Sleeps $ms milliseconds, then writes a marker: the marker says the job's
 * work is over, so a job killed mid-sleep has none (SleepJob marks first).
 */
class SleepThenMarkJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $ms;

    public $tag;

    public function __construct(int $ms = 100, ?string $tag = null)
    {
        $this->ms = $ms;
        $this->tag = $tag;
    }

    public function handle()
    {
        usleep($this->ms * 1000);

        $this->marker(['ms' => $this->ms]);
    }
}
