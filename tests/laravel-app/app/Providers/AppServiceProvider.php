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
        // RateLimitedJob's limiter: one job an hour.
        \Illuminate\Support\Facades\RateLimiter::for('parity', function ($job) {
            return \Illuminate\Cache\RateLimiting\Limit::perHour(1);
        });
    }
}
