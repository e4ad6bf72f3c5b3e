<?php

namespace Laravel\Horizon\Contracts {
    // Horizon's marker interface, declared here as an app without Horizon
    // could (qpool checks it by name).
    if (! interface_exists(Silenced::class, false)) {
        interface Silenced
        {
        }
    }
}

namespace App\Jobs {
    use App\Jobs\Concerns\WritesMarkers;
    use Illuminate\Bus\Queueable;
    use Illuminate\Contracts\Queue\ShouldQueue;
    use Illuminate\Foundation\Bus\Dispatchable;
    use Illuminate\Queue\InteractsWithQueue;
    use Illuminate\Queue\SerializesModels;

    /** Implements Horizon's Silenced: its done record is marked silenced (issue 31). */
    class SilencedJob implements ShouldQueue, \Laravel\Horizon\Contracts\Silenced
    {
        use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, WritesMarkers;

        public $tag;

        public function __construct(?string $tag = null)
        {
            $this->tag = $tag;
        }

        public function handle()
        {
            $this->marker();
        }
    }
}
