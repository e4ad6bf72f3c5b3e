<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use App\Models\Item;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Carries a model and a collection of two (made when dispatched): tagged App\Models\Item:<id> each (issue 31). */
class ModelTagsJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tag;

    protected $item;

    private $others;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
        $this->item = Item::create(['name' => 'one']);
        $ids = [Item::create(['name' => 'two'])->id, Item::create(['name' => 'three'])->id];
        $this->others = Item::whereIn('id', $ids)->orderBy('id')->get();
    }

    public function handle()
    {
        $this->marker();
    }
}
