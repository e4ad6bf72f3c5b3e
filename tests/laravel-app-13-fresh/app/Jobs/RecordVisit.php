<?php

namespace App\Jobs;

use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Queue\Queueable;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\Storage;

/* An app's job as `php artisan make:job` starts it: writes a line to
 * storage/app/private/visits.log and counts in the app's (database) cache. */
class RecordVisit implements ShouldQueue
{
    use Queueable;

    public function __construct(public string $page)
    {
    }

    public function handle(): void
    {
        Storage::append('visits.log', $this->page.' '.getmypid());
        Cache::add('visits', 0);
        Cache::increment('visits');
    }
}
