<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Leaks $mb MB per run on purpose (for --memory tests). */
class LeakJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    /** @var string[] */
    public static $leaked = [];

    public $tag;

    public $mb;

    public function __construct(?string $tag = null, int $mb = 20)
    {
        $this->tag = $tag;
        $this->mb = $mb;
    }

    public function handle()
    {
        $this->marker(['mb' => $this->mb]);

        static::$leaked[] = str_repeat('x', $this->mb * 1024 * 1024);
    }
}
