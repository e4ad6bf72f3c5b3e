<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Does nothing at all (benchmarks). */
class NoopJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public function handle()
    {
        //
    }
}
