<?php

namespace App\Console\Commands;

use App\Jobs\AlwaysFailsJob;
use App\Jobs\BatchJob;
use App\Jobs\EncryptedJob;
use App\Jobs\ExpiredUntilJob;
use App\Jobs\FlakyUntilJob;
use App\Jobs\ManualFailJob;
use App\Jobs\MarkerJob;
use App\Jobs\MaxExceptionsJob;
use App\Jobs\MissingModelFailJob;
use App\Jobs\MissingModelJob;
use App\Jobs\OverlapJob;
use App\Jobs\RateLimitedJob;
use App\Jobs\ReleaseJob;
use App\Jobs\UniqueJob;
use App\Models\Item;
use Illuminate\Console\Command;
use Illuminate\Support\Facades\Bus;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\Queue;
use Illuminate\Queue\Middleware\WithoutOverlapping;

/**
 * php artisan fixture:parity
 *
 * Dispatches the jobs of the version parity test
 * (tests/integration/test_laravel_versions.py), the way app code does, onto
 * the "default" queue of the redis connection, and prints the scenarios it
 * dispatched as a JSON list. Scenarios that need something this Laravel
 * version lacks (job attributes, debouncing, dontRetry) are left out; which
 * are dispatched is decided by class and method existence only.
 */
class FixtureParityCommand extends Command
{
    protected $signature = 'fixture:parity';

    protected $description = 'Dispatch the jobs of the Laravel version parity test';

    public function handle()
    {
        $done = [];

        foreach ($this->scenarios() as $name => $dispatch) {
            if ($dispatch() !== false) {
                $done[] = $name;
            }
        }

        $this->line(json_encode($done));

        return 0;
    }

    protected function scenarios(): array
    {
        return [
            'plain' => function () {
                MarkerJob::dispatch('plain');
                Queue::push('App\\Handlers\\StringHandler@handle', ['tag' => 'string', 'args' => []]);
            },
            'tries_backoff' => function () { AlwaysFailsJob::dispatch('tries'); },
            'release' => function () { ReleaseJob::dispatch('release'); },
            'fail' => function () { ManualFailJob::dispatch('fail'); },
            'max_exceptions' => function () { MaxExceptionsJob::dispatch('maxexc'); },
            'retry_until' => function () {
                FlakyUntilJob::dispatch('until-future');
                ExpiredUntilJob::dispatch('until-past');
            },
            'chain' => function () {
                Bus::chain([new MarkerJob('chain-1'), new MarkerJob('chain-2'), new MarkerJob('chain-3')])->dispatch();
                Bus::chain([new MarkerJob('chainf-1'), new ManualFailJob('chainf-2'), new MarkerJob('chainf-3')])->dispatch();
            },
            'batch' => function () {
                Bus::batch([new BatchJob('batch-1'), new BatchJob('batch-2'), new BatchJob('batch-3', true)])
                    ->name('parity')->allowFailures()->dispatch();
            },
            'unique' => function () {
                UniqueJob::dispatch('unique');
                UniqueJob::dispatch('unique'); // dropped: the first holds the lock
            },
            'without_overlapping' => function () {
                $key = (new WithoutOverlapping('parity'))->getLockKey(new OverlapJob);
                Cache::lock($key, 3600)->get(); // held: every attempt is released
                OverlapJob::dispatch('overlap');
            },
            'rate_limited' => function () {
                RateLimitedJob::dispatch('ratelimited');
                RateLimitedJob::dispatch('ratelimited');
            },
            'encrypted' => function () { EncryptedJob::dispatch('encrypted'); },
            'missing_models' => function () {
                $a = Item::create(['name' => 'gone']);
                $b = Item::create(['name' => 'gone too']);
                MissingModelJob::dispatch($a, 'missing-delete');
                MissingModelFailJob::dispatch($b, 'missing-fail');
                $a->delete();
                $b->delete();
            },
            'attributes' => function () {
                return $this->dispatchIf('Illuminate\\Queue\\Attributes\\Tries', function () {
                    \App\Jobs\AttributesJob::dispatch('attributes', 1);
                    \App\Jobs\AttributesFailJob::dispatch('attributes-fail');
                });
            },
            'dont_retry' => function () {
                $handler = app(\Illuminate\Contracts\Debug\ExceptionHandler::class);

                return $this->dispatchIf(method_exists($handler, 'shouldStopRetries'), function () {
                    \App\Jobs\DontRetryJob::dispatch('dontretry');
                });
            },
            'debounce' => function () {
                return $this->dispatchIf('Illuminate\\Queue\\Attributes\\DebounceFor', function () {
                    \App\Jobs\DebouncedJob::dispatch('debounce-1');
                    \App\Jobs\DebouncedJob::dispatch('debounce-2');
                });
            },
        ];
    }

    /** Run $dispatch when $feature (a class name, or a bool) is there; false when it is not. */
    protected function dispatchIf($feature, callable $dispatch)
    {
        if (is_string($feature) ? ! class_exists($feature) : ! $feature) {
            return false;
        }

        $dispatch();

        return true;
    }
}
