<?php

namespace App\Jobs;

use App\Jobs\Concerns\WritesMarkers;
use App\Models\Item;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Has its own tags() (which replace the model's, as in Horizon), one of them hostile markup (issue 31). */
class TaggedJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

    public $tag;

    public $item;

    public function __construct(?string $tag = null)
    {
        $this->tag = $tag;
        $this->item = Item::create(['name' => 'tagged']);
    }

    public function tags()
    {
        return ['tagged:'.$this->tag, '<img src=x onerror=alert(1)>', 7];
    }

    public function handle()
    {
        $this->marker();
    }
}
