<?php

namespace Qpool\Laravel;

use Throwable;

/**
 * A job's tags, by the rules Horizon documents (computed here, when the job
 * runs, for apps without Horizon; a payload Horizon tagged keeps its own):
 *
 *  - the job's `tags()` method, when it has one and it returns tags;
 *  - else `Model:id` for each Eloquent model, and each model of an Eloquent
 *    collection, among the job's properties.
 *
 * A queued mailable, notification or broadcast event is tagged by the object
 * it carries (the mailable, the notification, the event); a queued listener
 * by the listener's `tags($event)` and by its event. qpool bounds what it
 * keeps (20 tags of 120 bytes). Such a job is silenced when what it carries
 * (the listener: its class) implements Horizon's Silenced, as Horizon does.
 */
final class Tags
{
    /** @var object|null the command the last CallQueuedHandler unserialized (TaggingCallQueuedHandler) */
    public static $command = null;

    private const MAX = 50; // more are never kept (qpool keeps 20)

    private const BYTES_MAX = 512; // of one tag (qpool keeps 120, cut where UTF-8 allows)

    /**
     * Have CallQueuedHandler hand over the command it unserializes, when the
     * app does not bind CallQueuedHandler itself and getCommand() is the one
     * this adapter knows (Laravel 8 to 13). False: no computed tags.
     */
    public static function install($app): bool
    {
        $base = 'Illuminate\Queue\CallQueuedHandler';

        try {
            if (! class_exists($base) || $app->bound($base)) {
                return false;
            }

            $m = new \ReflectionMethod($base, 'getCommand');

            if (! $m->isProtected() || $m->getNumberOfParameters() !== 1 || $m->hasReturnType()) {
                return false;
            }

            require_once __DIR__.'/TaggingCallQueuedHandler.php';
            $app->bind($base, TaggingCallQueuedHandler::class);

            return true;
        } catch (Throwable $e) {
            Protocol::log('job tags are not computed: '.$e->getMessage());

            return false;
        }
    }

    /** Does the command the last job ran implement Horizon's Silenced (by name: Horizon need not be installed)? */
    public static function silenced(): bool
    {
        return self::isSilenced(self::$command);
    }

    /**
     * Horizon's rule: what a queued wrapper carries (the mailable, the
     * notification, the broadcast event, the listener's class), else the job
     * itself, implements Silenced.
     */
    public static function isSilenced($command): bool
    {
        try {
            $underlying = self::underlying($command);
            $implements = is_object($underlying) || (is_string($underlying) && class_exists($underlying))
                ? class_implements($underlying) : [];

            return is_array($implements) && isset($implements['Laravel\Horizon\Contracts\Silenced']);
        } catch (Throwable $e) {
            return false;
        }
    }

    /** @return object|string|null */
    private static function underlying($job)
    {
        if (! is_object($job)) {
            return null;
        }

        if (is_a($job, 'Illuminate\Events\CallQueuedListener')) {
            return is_string($job->class ?? null) ? $job->class : null;
        }

        return self::targets($job)[0] ?? null;
    }

    /**
     * What a job response says of the job that ran besides its tags: whether
     * it is silenced, and its batch id (batch()). Call before take().
     */
    public static function flags($payload): array
    {
        $batch = self::batch($payload);

        return (self::silenced() ? ['silenced' => true] : []) + ($batch !== null ? ['batch' => $batch] : []);
    }

    /**
     * The batch id (Bus::batch, the Batchable trait's batchId) of the job the
     * payload holds: the command this adapter unserialized, else (the hook
     * not installed) the serialized command's own top-level batchId
     * (payloadBatch), never a nested job's (a chained one's); null when it
     * has none. Call before take().
     */
    public static function batch($payload): ?string
    {
        try {
            $command = self::$command;
            if (! is_object($command)) {
                return self::payloadBatch($payload);
            }
            $id = $command->batchId ?? null;

            return is_string($id) && preg_match('/^[A-Za-z0-9._:-]{1,64}$/', $id) ? $id : null;
        } catch (Throwable $e) {
            return null;
        }
    }

    /**
     * The batch id in a payload's serialized command text alone (the
     * command's own top-level batchId: no unserialize), null when none: what
     * a job says before it runs. The same rule as the worker's
     * jobhist_payload_batch() (src/observe/jobhist.c).
     */
    public static function payloadBatch($payload): ?string
    {
        try {
            $serialized = is_array($payload) ? ($payload['data']['command'] ?? null) : null;
            $id = is_string($serialized) ? self::topBatchId($serialized) : null;

            return is_string($id) && preg_match('/^[A-Za-z0-9._:-]{1,64}$/', $id) ? $id : null;
        } catch (Throwable $e) {
            return null;
        }
    }

    /**
     * The string property batchId of the object PHP serialize text holds, not
     * one of a nested value: its tokens at depth 1 are its properties' names
     * and values in turn (a string's bytes skipped by its length). Null when
     * it has none or the text is not well formed; linear, no unserialize().
     */
    private static function topBatchId(string $s): ?string
    {
        if (strpos($s, 'batchId') === false || ($s[0] ?? '') !== 'O') {
            return null;
        }
        [$n, $i, $depth, $el, $want] = [strlen($s), 0, 0, 0, false];
        while ($i < $n) {
            if ($s[$i] === '}') {
                if (--$depth <= 0) {
                    return null; // the object's end: none
                }
                $i++;
                continue;
            }
            [$type, $str, $open] = [$s[$i], null, 0];
            if (! preg_match('/N;|[bidrR]:[^;]*;|a:\d+:\{|[sEOC]:(\d+):"/A', $s, $m, 0, $i)) {
                return null;
            }
            $i += strlen($m[0]);
            if ($type === 'a') {
                $open = 1;
            } elseif (isset($m[1])) {
                $len = (int) $m[1];
                if ($len > $n - $i - 1 || $s[$i + $len] !== '"') {
                    return null;
                }
                [$str, $i] = [substr($s, $i, $len), $i + $len + 1];
                if ($type === 's' || $type === 'E') {
                    if (($s[$i++] ?? '') !== ';') {
                        return null;
                    }
                } elseif (! preg_match('/:(\d+):\{/A', $s, $c, 0, $i)) {
                    return null;
                } else {
                    $i += strlen($c[0]) + ($type === 'C' ? (int) $c[1] + 1 : 0); // C: its own bytes, then '}'
                    if ($type === 'C' && ($s[$i - 1] ?? '') !== '}') {
                        return null;
                    }
                    $open = $type === 'O' ? 1 : 0;
                }
            }
            if ($depth === 1) {
                if ($want) {
                    return $type === 's' ? $str : null;
                }
                $want = $el++ % 2 === 0 && $type === 's' && $str === 'batchId';
            }
            $depth += $open;
        }

        return null;
    }

    /** The tags of the command the last job ran (forgotten after); [] on any error. */
    public static function take(): array
    {
        $command = self::$command;
        self::$command = null;

        if (! is_object($command)) {
            return [];
        }

        try {
            return self::bounded(self::of($command));
        } catch (Throwable $e) {
            return [];
        }
    }

    public static function of($job): array
    {
        if (is_a($job, 'Illuminate\Events\CallQueuedListener')) {
            return self::ofListener($job);
        }

        $targets = self::targets($job);
        $explicit = self::explicit($targets);

        return $explicit ?: self::models($targets);
    }

    private static function ofListener($job): array
    {
        $event = self::event($job);
        $tags = [];

        if (is_string($job->class ?? null) && method_exists($job->class, 'tags')) {
            $listener = (new \ReflectionClass($job->class))->newInstanceWithoutConstructor();
            $tags = self::strings($listener->tags($event));
        }

        return array_values(array_unique(array_merge($tags, self::of($event))));
    }

    /** What a queued wrapper carries, else the job itself. */
    private static function targets($job): array
    {
        $carried = [
            'Illuminate\Broadcasting\BroadcastEvent' => 'event',
            'Illuminate\Mail\SendQueuedMailable' => 'mailable',
            'Illuminate\Notifications\SendQueuedNotifications' => 'notification',
        ];

        foreach ($carried as $class => $property) {
            if (is_a($job, $class)) {
                return is_object($job->{$property} ?? null) ? [$job->{$property}] : [];
            }
        }

        return [$job];
    }

    private static function event($listenerJob)
    {
        $data = $listenerJob->data ?? null;

        return is_array($data) && isset($data[0]) && is_object($data[0]) ? $data[0] : new \stdClass();
    }

    private static function explicit(array $targets): array
    {
        $tags = [];

        foreach ($targets as $t) {
            if (method_exists($t, 'tags')) {
                $tags = array_merge($tags, self::strings($t->tags()));
            }
        }

        return array_values(array_unique($tags));
    }

    private static function models(array $targets): array
    {
        $tags = [];

        foreach ($targets as $t) {
            foreach ((new \ReflectionObject($t))->getProperties() as $p) {
                if ($p->isStatic()) {
                    continue;
                }

                if (PHP_VERSION_ID < 80100) {
                    $p->setAccessible(true); // always so from 8.1; deprecated in 8.5
                }

                if (! $p->isInitialized($t)) {
                    continue;
                }

                $value = $p->getValue($t);
                $models = is_a($value, 'Illuminate\Database\Eloquent\Collection') ? $value->all() : [$value];

                foreach ($models as $m) {
                    if (is_a($m, 'Illuminate\Database\Eloquent\Model') && is_scalar($m->getKey())) {
                        $tags[] = get_class($m).':'.$m->getKey();
                    }
                }

                if (count($tags) >= self::MAX) {
                    break 2;
                }
            }
        }

        return array_values(array_unique($tags));
    }

    private static function strings($tags): array
    {
        $out = [];

        foreach (is_iterable($tags) ? $tags : [] as $t) {
            if (is_scalar($t) || (is_object($t) && method_exists($t, '__toString'))) {
                $out[] = substr((string) $t, 0, self::BYTES_MAX); // a huge one never crosses the pipe
            }

            if (count($out) >= self::MAX) {
                break;
            }
        }

        return $out;
    }

    private static function bounded(array $tags): array
    {
        return array_map(function ($t) {
            return substr($t, 0, self::BYTES_MAX);
        }, array_slice(array_values(array_filter($tags, function ($t) {
            return is_string($t) && $t !== '';
        })), 0, self::MAX));
    }
}
