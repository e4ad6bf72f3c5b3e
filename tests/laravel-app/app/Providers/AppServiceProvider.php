<?php

namespace App\Providers;

use Illuminate\Support\ServiceProvider;

class AppServiceProvider extends ServiceProvider
{
    public function register()
    {
        //
    }

    public function boot()
    {
        // FIXTURE_BOOT_HAZARDS: connect and draw random numbers while booting (qpool's preload tests).
        \App\Support\BootHazards::boot();

        // RateLimitedJob's limiter: one job an hour.
        \Illuminate\Support\Facades\RateLimiter::for('parity', function ($job) {
            return \Illuminate\Cache\RateLimiting\Limit::perHour(1);
        });
    }
}
