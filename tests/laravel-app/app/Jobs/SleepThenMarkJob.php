<?php

namespace App\Jobs;

/**
 * SleepJob in the other order: sleeps $ms milliseconds, then writes its
 * marker, so the marker says the job's work is over and a job killed
 * mid-sleep has none (SleepJob marks first).
 */
class SleepThenMarkJob extends SleepJob
{
    public function handle()
    {
        usleep($this->ms * 1000);

        $this->marker(['ms' => $this->ms]);
    }
}
