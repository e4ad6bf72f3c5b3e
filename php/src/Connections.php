<?php

namespace Qpool\Laravel;

use Throwable;

/**
 * What the zygote (Zygote.php) must not hand its forked handlers: the
 * connections the app's boot opened. purge() closes the framework's own
 * (databases, Redis, cache stores, queue connections); openSockets() lists
 * the sockets still open after that (an app that connects in a service
 * provider by other means), which the zygote will not share.
 */
final class Connections
{
    public static function purge($app): void
    {
        if ($app->resolved('db')) {
            foreach (array_keys($app['db']->getConnections()) as $name) {
                $app['db']->purge($name);
            }
        }

        if ($app->resolved('redis')) {
            $redis = $app['redis'];
            $names = method_exists($redis, 'connections') ? array_keys((array) $redis->connections()) : [];

            foreach ($names as $name) {
                method_exists($redis, 'purge') ? $redis->purge($name) : self::forget($redis, 'connections', $name);
            }
        }

        // Resolved once and kept by the container: they hold a connection.
        foreach (['db.connection', 'redis.connection', 'cache.store', 'queue.connection'] as $abstract) {
            $app->forgetInstance($abstract);
        }

        if ($app->resolved('cache')) {
            self::forget($app['cache'], 'stores', null); // memcached / DynamoDB clients; rebuilt on use
        }

        if ($app->resolved('queue')) {
            self::forget($app['queue'], 'connections', null); // SQS / Beanstalkd clients; rebuilt on use
        }

        \Illuminate\Support\Facades\Facade::clearResolvedInstances();
    }

    /** Unset $object->$property[$key] (all of it when $key is null), whatever its visibility. */
    private static function forget($object, string $property, $key): void
    {
        try {
            (function () use ($property, $key) {
                if (! property_exists($this, $property) || ! is_array($this->{$property})) {
                    return;
                }

                if ($key === null) {
                    $this->{$property} = [];
                } else {
                    unset($this->{$property}[$key]);
                }
            })->call($object);
        } catch (Throwable $e) {
            Protocol::log('zygote: cannot reset '.get_class($object).'::$'.$property.': '.$e->getMessage());
        }
    }

    /**
     * The sockets (and pipes) this process holds besides stdio and those
     * whose identity (Protocol::identity) is in $ours, each described with
     * its addresses where /proc knows them.
     */
    public static function openSockets(array $ours): array
    {
        $open = [];

        foreach (Protocol::descriptors() as $fd) {
            $st = $fd > 2 ? Protocol::statFd($fd) : null;
            $type = $st ? $st['mode'] & 0170000 : 0;

            if (($type !== 0140000 && $type !== 0010000) || in_array(Protocol::identity($st), $ours, true)) {
                continue; // not a socket (0140000) nor a pipe (0010000), or ours
            }

            $open[] = 'fd '.$fd.': '.($type === 0140000 ? self::describeSocket((string) $st['ino']) : 'a pipe');
        }

        return $open;
    }

    private static function describeSocket(string $inode): string
    {
        foreach (['tcp', 'tcp6'] as $table) {
            foreach (@file('/proc/self/net/'.$table) ?: [] as $line) {
                $f = preg_split('/\\s+/', trim($line));

                if (($f[9] ?? null) === $inode) {
                    return $table.' '.self::address($f[1]).' -> '.self::address($f[2]);
                }
            }
        }

        foreach (@file('/proc/self/net/unix') ?: [] as $line) {
            $f = preg_split('/\\s+/', trim($line));

            if (($f[6] ?? null) === $inode) {
                return 'unix socket'.(isset($f[7]) ? ' '.$f[7] : '');
            }
        }

        return 'socket '.$inode;
    }

    /** "0100007F:18EB" -> "127.0.0.1:6379" (IPv6: the hex as it is). */
    private static function address(string $hex): string
    {
        [$ip, $port] = explode(':', $hex) + [1 => '0'];
        $port = hexdec($port);

        if (strlen($ip) === 8) {
            return implode('.', array_reverse(array_map('hexdec', str_split($ip, 2)))).':'.$port;
        }

        return '['.$ip.']:'.$port;
    }
}
