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
    }

    public function shouldDiscoverEvents()
    {
        return false;
    }
}
