<?php

namespace App\Console\Commands;

use Illuminate\Console\Command;
use Illuminate\Support\Facades\Cache;

/**
 * Laravel 8 has no queue:resume (alias queue:continue in 12.40+); this
 * forgets the key QueuePauseCommand wrote, as QueueManager::resume does.
 */
class QueueResumeCommand extends Command
{
    protected $signature = 'queue:resume {queue? : [connection:]queue} {--all : resume every queue}';

    protected $description = 'Resume a paused queue (the cache keys of Laravel 12.40+)';

    public function handle()
    {
        if ($this->option('all')) {
            Cache::forget('illuminate:queues:paused');

            return 0;
        }
        $arg = (string) $this->argument('queue');
        [$connection, $queue] = str_contains($arg, ':') ? explode(':', $arg, 2) : [config('queue.default'), $arg];
        Cache::forget("illuminate:queue:paused:{$connection}:{$queue}");
        $this->line("resumed {$connection}:{$queue}");

        return 0;
    }
}
