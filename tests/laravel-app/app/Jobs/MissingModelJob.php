<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use App\Models\Item;

/** Carries an Item; with $deleteWhenMissingModels a deleted Item makes the job vanish quietly. */
class MissingModelJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $deleteWhenMissingModels = true;

    public $item;

    public $tag;

    public function __construct(Item $item, ?string $tag = null)
    {
        $this->item = $item;
        $this->tag = $tag;
    }

    public function handle()
    {
        $this->marker();
    }
}
