<?php

namespace App\Console\Commands;

use Illuminate\Console\Command;
use Illuminate\Support\Facades\Cache;

/**
 * Laravel 8 has no queue:pause. This reproduces what Laravel 12.40+
 * (QueueManager::pause, PauseCommand) and 13.25+ (pauseAll) write, so the
 * tests can check that qpool honours those keys:
 *   queue:pause [connection:]queue  ->  Cache::forever("illuminate:queue:paused:{conn}:{queue}", true)
 *   queue:pause --all               ->  Cache::forever("illuminate:queues:paused", true)
 */
class QueuePauseCommand extends Command
{
    protected $signature = 'queue:pause {queue? : [connection:]queue} {--all : pause every queue}';

    protected $description = 'Pause a queue (the cache keys of Laravel 12.40+)';

    public function handle()
    {
        if ($this->option('all')) {
            Cache::forever('illuminate:queues:paused', true);
            $this->line('paused all queues');

            return 0;
        }
        [$connection, $queue] = $this->parse((string) $this->argument('queue'));
        Cache::forever("illuminate:queue:paused:{$connection}:{$queue}", true);
        $this->line("paused {$connection}:{$queue}");

        return 0;
    }

    private function parse(string $arg): array
    {
        if (str_contains($arg, ':')) {
            return explode(':', $arg, 2);
        }

        return [config('queue.default'), $arg];
    }
}
