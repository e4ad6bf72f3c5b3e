<?php

namespace App\Jobs;

use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Queue\Queueable;
use RuntimeException;

/* A job that always fails: queue:work's defaults (one try) put it in
 * failed_jobs at once. */
class SendReport implements ShouldQueue
{
    use Queueable;

    public function __construct(public string $to)
    {
    }

    public function handle(): void
    {
        throw new RuntimeException('report server down for '.$this->to);
    }
}
