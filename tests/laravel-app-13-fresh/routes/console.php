<?php

use App\Jobs\RecordVisit;
use App\Jobs\SendReport;
use Illuminate\Support\Facades\Artisan;

// How the app dispatches: RecordVisit::dispatch(...) on the default connection.
Artisan::command('visits:record {page} {--count=1}', function (string $page) {
    for ($i = 1; $i <= (int) $this->option('count'); $i++) {
        RecordVisit::dispatch($page.'-'.$i);
    }
})->purpose('Queue RecordVisit jobs');

Artisan::command('reports:send {to}', function (string $to) {
    SendReport::dispatch($to);
})->purpose('Queue a SendReport job');
