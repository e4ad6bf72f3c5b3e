<?php

namespace App\Console\Commands;

use Illuminate\Console\Command;
use Illuminate\Contracts\Bus\Dispatcher;
use Illuminate\Contracts\Queue\Factory as QueueFactory;
use ReflectionClass;
use ReflectionNamedType;

/**
 * php artisan fixture:dispatch MarkerJob --count=3 --tag=t
 * php artisan fixture:dispatch SleepJob --arg=50 --tag=s
 * php artisan fixture:dispatch NoopJob --count=10000
 * php artisan fixture:dispatch string --arg=a --arg=b --tag=x
 *
 * Constructor parameters are filled in order: a parameter named $tag gets
 * the tag, every other parameter takes the next --arg (cast to int for int
 * parameters), or its default when the --arg values run out.
 */
class FixtureDispatchCommand extends Command
{
    protected $signature = 'fixture:dispatch
        {job : Short class name in App\\Jobs (MarkerJob, SleepJob, ...) or "string" for App\\Handlers\\StringHandler@handle}
        {--queue=default : Queue name}
        {--connection=redis : Queue connection}
        {--count=1 : Number of jobs}
        {--delay=0 : Delay in seconds (later() / ->delay())}
        {--tag= : Tag; with --count > 1 the jobs get <tag>-1 .. <tag>-N}
        {--arg=* : Constructor arguments other than $tag, in order}
        {--mode=auto : auto | dispatch | bulk (auto: bulk for count > 1 without delay)}';

    protected $description = 'Dispatch test jobs onto a queue the way a Laravel app does';

    /** Jobs per MULTI/EXEC in bulk mode. */
    const CHUNK = 1000;

    public function handle(Dispatcher $bus, QueueFactory $queues)
    {
        $name = $this->argument('job');
        $queue = (string) $this->option('queue');
        $connection = (string) $this->option('connection');
        $count = max(0, (int) $this->option('count'));
        $delay = max(0, (int) $this->option('delay'));
        $tag = $this->option('tag');
        $tag = ($tag === null || $tag === '') ? null : (string) $tag;
        $args = (array) $this->option('arg');
        $mode = (string) $this->option('mode');

        if ($mode === 'auto') {
            $mode = ($count > 1 && $delay === 0) ? 'bulk' : 'dispatch';
        }

        if (! in_array($mode, ['dispatch', 'bulk'], true)) {
            $this->error("unknown --mode={$mode}");

            return 2;
        }

        $tagFor = function (int $i) use ($tag, $count) {
            return ($tag !== null && $count > 1) ? "{$tag}-{$i}" : $tag;
        };

        $conn = $queues->connection($connection);

        if (strtolower($name) === 'string') {
            $handler = 'App\\Handlers\\StringHandler@handle';
            $batch = [];

            for ($i = 1; $i <= $count; $i++) {
                $data = ['tag' => $tagFor($i), 'args' => $args];

                if ($mode === 'bulk' && $delay === 0) {
                    $batch[] = $data;

                    if (count($batch) >= self::CHUNK || $i === $count) {
                        $this->bulkStrings($conn, $handler, $batch, $queue);
                        $batch = [];
                    }
                } elseif ($delay > 0) {
                    $conn->later($delay, $handler, $data, $queue);
                } else {
                    $conn->push($handler, $data, $queue);
                }
            }

            $this->line("dispatched {$count}");

            return 0;
        }

        $class = 'App\\Jobs\\'.$name;

        if (! class_exists($class)) {
            $this->error("no such job class: {$class}");

            return 2;
        }

        $batch = [];

        for ($i = 1; $i <= $count; $i++) {
            $job = $this->makeJob($class, $tagFor($i), $args);

            // Exactly what Foo::dispatch(...)->onConnection()->onQueue()->delay() does.
            $job->onConnection($connection)->onQueue($queue);

            if ($delay > 0) {
                $job->delay($delay);
            }

            if ($mode === 'dispatch') {
                $bus->dispatch($job);
                continue;
            }

            $batch[] = $job;

            if (count($batch) >= self::CHUNK || $i === $count) {
                if ($delay > 0) {
                    // 8.x bulk() ignores delays: later() per job, as dispatch would.
                    foreach ($batch as $queued) {
                        $conn->later($delay, $queued, '', $queue);
                    }
                } else {
                    // RedisQueue::bulk(): push() per job inside pipeline + MULTI/EXEC.
                    $conn->bulk($batch, '', $queue);
                }

                $batch = [];
            }
        }

        $this->line("dispatched {$count}");

        return 0;
    }

    /**
     * Queue::bulk() takes one $data for all jobs; do what it does (push()
     * inside pipeline + MULTI/EXEC) by hand to keep per-job data.
     */
    protected function bulkStrings($conn, string $handler, array $batch, string $queue): void
    {
        $redis = $conn->getConnection();

        $redis->pipeline(function () use ($redis, $conn, $handler, $batch, $queue) {
            $redis->transaction(function () use ($conn, $handler, $batch, $queue) {
                foreach ($batch as $data) {
                    $conn->push($handler, $data, $queue);
                }
            });
        });
    }

    protected function makeJob(string $class, ?string $tag, array $args)
    {
        $ctor = (new ReflectionClass($class))->getConstructor();

        if (! $ctor) {
            return new $class;
        }

        $params = [];

        foreach ($ctor->getParameters() as $param) {
            if ($param->getName() === 'tag') {
                $params[] = $tag;
                continue;
            }

            if ($args) {
                $value = array_shift($args);
                $type = $param->getType();

                if ($type instanceof ReflectionNamedType && $type->getName() === 'int') {
                    $value = (int) $value;
                } elseif ($type instanceof ReflectionNamedType && $type->getName() === 'float') {
                    $value = (float) $value;
                }

                $params[] = $value;
            } elseif ($param->isDefaultValueAvailable()) {
                $params[] = $param->getDefaultValue();
            } else {
                throw new \InvalidArgumentException("{$class}: missing --arg for \${$param->getName()}");
            }
        }

        return new $class(...$params);
    }
}
