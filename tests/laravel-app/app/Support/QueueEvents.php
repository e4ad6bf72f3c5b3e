<?php

namespace App\Support;

use App\Listeners\RecordQueueEvent;
use Illuminate\Support\Env;
use ReflectionClass;

/**
 * With MARKER_EVENTS=all, RecordQueueEvent also records every other event
 * class this Laravel version has in Illuminate\Queue\Events (found in the
 * framework's own directory, so each version lists exactly its own).
 */
class QueueEvents
{
    /** The event classes the providers always listen to. */
    const BASIC = [
        'Illuminate\Queue\Events\JobProcessing',
        'Illuminate\Queue\Events\JobProcessed',
        'Illuminate\Queue\Events\JobExceptionOccurred',
        'Illuminate\Queue\Events\JobFailed',
    ];

    public static function all(): array
    {
        $dir = dirname((new ReflectionClass(self::BASIC[0]))->getFileName());
        $classes = [];

        foreach (glob($dir.'/*.php') ?: [] as $file) {
            $class = 'Illuminate\Queue\Events\\'.basename($file, '.php');

            if (class_exists($class)) {
                $classes[] = $class;
            }
        }

        sort($classes);

        return $classes;
    }

    public static function listenToTheRest($events): void
    {
        if (Env::get('MARKER_EVENTS') !== 'all') {
            return;
        }

        foreach (array_diff(self::all(), self::BASIC) as $class) {
            $events->listen($class, RecordQueueEvent::class);
        }
    }
}
