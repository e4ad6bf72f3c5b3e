<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Writes a marker, then sleeps $ms milliseconds. */
class SleepJob implements ShouldQueue
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
        $this->marker(['ms' => $this->ms]);

        usleep($this->ms * 1000);
    }
}
