<?php

namespace App\Providers;

use App\Listeners\RecordQueueEvent;
use Illuminate\Foundation\Support\Providers\EventServiceProvider as ServiceProvider;
use Illuminate\Queue\Events\JobExceptionOccurred;
use Illuminate\Queue\Events\JobFailed;
use Illuminate\Queue\Events\JobProcessed;
use Illuminate\Queue\Events\JobProcessing;

class EventServiceProvider extends ServiceProvider
{
    /**
     * The event listener mappings for the application.
     *
     * @var array
     */
    protected $listen = [
        JobProcessing::class => [RecordQueueEvent::class],
        JobProcessed::class => [RecordQueueEvent::class],
        JobExceptionOccurred::class => [RecordQueueEvent::class],
        JobFailed::class => [RecordQueueEvent::class],
    ];

    public function boot()
    {
        \App\Support\QueueEvents::listenToTheRest($this->app['events']);

        // test_batches.py: with FAIL_ONCE_DIR/stall-retry, a retry hangs here
        // (the app agent's alarm then kills it half way through a batch retry)
        if (class_exists('Illuminate\Queue\Events\JobRetryRequested')) {
            $this->app['events']->listen('Illuminate\Queue\Events\JobRetryRequested', function () {
                $dir = getenv('FAIL_ONCE_DIR');

                if ($dir && file_exists($dir.'/stall-retry')) {
                    sleep(30);
                }
            });
        }
    }

    public function shouldDiscoverEvents()
    {
        return false;
    }
}
