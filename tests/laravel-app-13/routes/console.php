<?php

use App\Jobs\MarkerJob;
use Illuminate\Support\Facades\Artisan;

// php artisan fixture:marker TAG  (MarkerJob::dispatch, as app code does)
Artisan::command('fixture:marker {tag?} {--queue=default}', function ($tag = null) {
    MarkerJob::dispatch($tag)->onQueue($this->option('queue'));
    $this->line('dispatched 1');
})->purpose('Dispatch one MarkerJob');
