<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use App\Models\Item;

/** Carries an Item, without deleteWhenMissingModels: a deleted Item fails the job at once. */
class MissingModelFailJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tries = 3;

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

    public function failed(?\Throwable $e = null)
    {
        $this->failedMarker($e);
    }
}
