<?php

namespace App\Providers;

use App\Listeners\RecordQueueEvent;
use App\Support\QueueEvents;
use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Queue\Events\JobExceptionOccurred;
use Illuminate\Queue\Events\JobFailed;
use Illuminate\Queue\Events\JobProcessed;
use Illuminate\Queue\Events\JobProcessing;
use Illuminate\Support\Facades\Event;
use Illuminate\Support\Facades\RateLimiter;
use Illuminate\Support\ServiceProvider;

class AppServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        //
    }

    public function boot(): void
    {
        // FIXTURE_BOOT_HAZARDS: connect and draw random numbers while booting (qpool's preload tests).
        \App\Support\BootHazards::boot();

        // 11+ has no EventServiceProvider in the app; RecordQueueEvent::handle()
        // has no typed parameter, so event discovery does not pick it up twice.
        foreach ([JobProcessing::class, JobProcessed::class, JobExceptionOccurred::class, JobFailed::class] as $event) {
            Event::listen($event, RecordQueueEvent::class);
        }

        QueueEvents::listenToTheRest($this->app['events']);

        // RateLimitedJob's limiter: one job an hour.
        RateLimiter::for('parity', function ($job) {
            return Limit::perHour(1);
        });
    }
}
