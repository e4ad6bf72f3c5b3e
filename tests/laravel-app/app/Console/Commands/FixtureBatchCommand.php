<?php

namespace App\Console\Commands;

use App\Jobs\BatchJob;
use Illuminate\Console\Command;
use Illuminate\Support\Facades\Bus;

/**
 * php artisan fixture:batch --count=10 --fail=2 --name=import [--name-hex=ff41] [--allow-failures] [--sleep=S]
 *
 * Dispatches one Bus::batch of BatchJob: the last --fail of them throw
 * (tries 1) the first time they run, unless FAIL_ONCE_DIR holds their mark
 * (the job writes it when it fails, so a retried job succeeds). --name-hex
 * gives the name as raw bytes (invalid UTF-8 for tests); with --sleep the
 * first job sleeps S seconds (past a timeout). Prints the batch id.
 */
class FixtureBatchCommand extends Command
{
    protected $signature = 'fixture:batch
        {--count=10 : Jobs in the batch}
        {--fail=0 : How many of them fail on their first run}
        {--name= : The batch name}
        {--name-hex= : The batch name as hex bytes}
        {--queue=default : Queue name}
        {--allow-failures : The batch goes on after a failure}
        {--sleep=0 : Seconds the first job sleeps}';

    protected $description = 'Dispatch a job batch whose last jobs fail once';

    public function handle()
    {
        $count = (int) $this->option('count');
        $fail = (int) $this->option('fail');
        $jobs = [];

        for ($i = 1; $i <= $count; $i++) {
            $sleep = $i === 1 ? (int) $this->option('sleep') : 0;
            $jobs[] = (new BatchJob('batch-'.$i, $i > $count - $fail, $sleep))->onQueue($this->option('queue'));
        }

        $name = $this->option('name-hex') !== null ? hex2bin($this->option('name-hex')) : (string) $this->option('name');
        $batch = Bus::batch($jobs)->name($name)->onQueue($this->option('queue'));

        if ($this->option('allow-failures')) {
            $batch->allowFailures();
        }

        $this->line($batch->dispatch()->id);

        return 0;
    }
}
