<?php

namespace App\Support;

use Illuminate\Support\Env;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Redis;

/**
 * What a real app does while it boots, that a process forked after the boot
 * must not inherit (qpool's preload, tests/integration/test_preload.py):
 * FIXTURE_BOOT_HAZARDS is a comma-separated list of
 *   redis   talk to Redis (the connection stays open in the booted app)
 *   db      query the database (the PDO stays open)
 *   rand    draw from mt_rand (seeds it in the booting process)
 *   socket  open a socket of its own and keep it (not a framework connection)
 *   slowpush  each insert into the jobs table takes a second more, once done
 *           (a slow queue backend: tests/integration/test_app_failed.py)
 *   slowrows  the default database connection, whenever it connects, has
 *           a function fixture_slow(v): v, a quarter of a millisecond later
 *           (a slow scan of a view: tests/integration/test_app_failed.py)
 *   exit76  end the process with status 76 (what qpool's zygote says when
 *           the app moved: an app's own exit must not read as that)
 */
class BootHazards
{
    /** @var \WeakReference|null the PDO the boot opened */
    public static $bootPdo;

    /** @var int|null the Redis client id of the boot's connection */
    public static $bootRedisId;

    /** @var resource|null */
    public static $socket;

    public static function boot(): void
    {
        $what = array_filter(explode(',', (string) Env::get('FIXTURE_BOOT_HAZARDS', '')));

        if (in_array('redis', $what, true)) {
            self::$bootRedisId = (int) Redis::connection()->client()->rawCommand('CLIENT', 'ID');
        }

        if (in_array('db', $what, true)) {
            DB::select('select 1');
            self::$bootPdo = \WeakReference::create(DB::connection()->getPdo());
        }

        if (in_array('rand', $what, true)) {
            mt_rand();
        }

        if (in_array('socket', $what, true)) {
            self::$socket = stream_socket_client('tcp://'.Env::get('REDIS_HOST').':'.Env::get('REDIS_PORT'));
        }

        if (in_array('slowpush', $what, true)) {
            DB::listen(function ($query) {
                if (stripos($query->sql, 'insert into "jobs"') !== false) {
                    sleep(1);
                }
            });
        }

        if (in_array('slowrows', $what, true)) {
            self::slowRows();
        }

        if (in_array('exit76', $what, true)) {
            exit(76);
        }
    }

    /** fixture_slow(v) on each connection of the default one (an agent forked after the boot connects anew). */
    private static function slowRows(): void
    {
        app('db')->extend((string) config('database.default'), function ($config, $name) {
            $connection = app('db.factory')->make($config, $name);
            $pdo = $connection->getPdo();
            $slow = function ($v) {
                usleep(250);

                return $v;
            };

            if ($pdo instanceof \Pdo\Sqlite) {
                $pdo->createFunction('fixture_slow', $slow, 1);
            } else {
                $pdo->sqliteCreateFunction('fixture_slow', $slow, 1);
            }

            return $connection;
        });
    }

    /** The job's database connection is the one the boot opened. */
    public static function usesBootPdo(): bool
    {
        $pdo = self::$bootPdo ? self::$bootPdo->get() : null;

        return $pdo !== null && $pdo === DB::connection()->getPdo();
    }
}
