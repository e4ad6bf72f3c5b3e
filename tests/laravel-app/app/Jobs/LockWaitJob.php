<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/**
 * Writes a marker, then waits for an exclusive flock() on $path: a blocking
 * system call the kernel restarts after a signal installed with SA_RESTART.
 */
class LockWaitJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $path;

    public $tag;

    public function __construct(string $path = '', ?string $tag = null)
    {
        $this->path = $path;
        $this->tag = $tag;
    }

    public function handle()
    {
        $fh = fopen($this->path, 'c');
        $this->marker(['path' => $this->path]);
        $got = flock($fh, LOCK_EX);
        $this->marker(['phase' => 'after-lock', 'got' => $got]);
    }
}
