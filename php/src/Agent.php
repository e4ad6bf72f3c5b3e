<?php

namespace Qpool\Laravel;

use Throwable;

/**
 * The app agent: a long-lived process the zygote forks when qpool's master
 * asks for it ("agent 1 MASTERPID" with one stream socket). It holds the
 * booted app and answers what the C side cannot read itself, through the
 * app's own drivers: one JSON request per line, one JSON reply per line,
 * with the request's id (src/master/agent_wire.h is the master's side, and
 * checks every reply). Its first line, unasked, is its hello:
 *
 *   {"id":0,"ok":true,"op":"hello","pid":123,"laravel":"8.83.27"}
 *
 * Ops:
 *   signals  {"id":N,"op":"signals","restart_key":"illuminate:queue:restart","queues":["redis:default"]}
 *            -> {"id":N,"ok":true,"restart":"1764380000"|null,"paused_all":false,"paused":[false]}
 *            Laravel's queue:restart stamp and queue:pause keys, read through
 *            the app's default cache store (file, database, memcached,
 *            dynamodb, redis...), as queue:work reads them.
 *   sizes    {"id":N,"op":"sizes","connection":"database","queues":["default"]}
 *            -> {"id":N,"ok":true,"sizes":[{"ready":12,"delayed":3,"reserved":1}]}
 *            Each queue's size through the app's queue connection: ready,
 *            delayed and reserved where the driver says them apart
 *            (pendingSize / delayedSize / reservedSize, Laravel 11+), else
 *            ready is its size() and the others null.
 * An op it does not know, or one that throws: {"id":N,"ok":false,"error":"..."}.
 *
 * It exits on the end of its socket, when its zygote goes (the parent-death
 * signal), on a request line longer than it takes, and by SIGALRM when one
 * request takes longer than REQUEST_TIMEOUT (a cache that hangs): the master
 * asks its zygote for a new one.
 */
final class Agent
{
    public const LINE_MAX = 65536;

    private const REQUEST_TIMEOUT = 20;

    private const VALUE_MAX = 256;

    /** @var object the booted application */
    private $app;

    /** @var resource the stream socket to the master */
    private $io;

    public function __construct($app, $io)
    {
        $this->app = $app;
        $this->io = $io;
    }

    public function run(): int
    {
        $pool = (string) getenv('QPOOL_POOL');
        @cli_set_process_title('qpool agent: pool '.$pool);
        stream_set_blocking($this->io, true);

        if (! $this->reply(['id' => 0, 'ok' => true, 'op' => 'hello', 'pid' => getmypid(),
            'laravel' => (string) $this->app->version()])) {
            return 0;
        }

        $parent = posix_getppid();

        while (true) {
            $read = [$this->io];
            $write = $except = null;
            $ready = @stream_select($read, $write, $except, 1);

            if (posix_getppid() !== $parent) {
                return 0; // the zygote has gone
            }

            if ($ready === false || $ready === 0) {
                continue;
            }

            $line = fgets($this->io, self::LINE_MAX + 1);

            if ($line === false || $line === '') {
                return 0; // the master closed its end
            }

            if (substr($line, -1) !== "\n") {
                Protocol::log('agent: a request line longer than '.self::LINE_MAX.' bytes; exiting');

                return 1;
            }

            pcntl_alarm(self::REQUEST_TIMEOUT);
            $ok = $this->reply($this->answer($line));
            pcntl_alarm(0);

            if (! $ok) {
                return 0;
            }
        }
    }

    /** One line to the master; false when it cannot be written (the master has gone). */
    private function reply(array $reply): bool
    {
        $json = json_encode($reply, JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);

        if ($json === false) {
            $json = json_encode(['id' => $reply['id'] ?? 0, 'ok' => false, 'error' => 'the reply cannot be encoded']);
        }

        $json .= "\n";

        for ($done = 0; $done < strlen($json); $done += $n) {
            $n = @fwrite($this->io, substr($json, $done));

            if (! $n) {
                return false;
            }
        }

        return true;
    }

    private function answer(string $line): array
    {
        $req = json_decode($line, true, 8);
        $id = is_array($req) && is_int($req['id'] ?? null) && $req['id'] > 0 ? $req['id'] : 0;

        if ($id === 0) {
            return ['id' => 0, 'ok' => false, 'error' => 'a request without a valid id'];
        }

        try {
            switch ($req['op'] ?? null) {
                case 'signals':
                    return ['id' => $id, 'ok' => true] + $this->signals($req);
                case 'sizes':
                    return ['id' => $id, 'ok' => true] + $this->sizes($req);
                default:
                    return ['id' => $id, 'ok' => false, 'error' => 'unknown op'];
            }
        } catch (Throwable $e) {
            return ['id' => $id, 'ok' => false,
                'error' => substr(get_class($e).': '.$e->getMessage(), 0, 200)];
        }
    }

    /** queue:restart's stamp and the queue:pause keys, through the app's cache store. */
    private function signals(array $req): array
    {
        $store = $this->app['cache']->store();
        $key = $req['restart_key'] ?? null;
        $restart = is_string($key) && $key !== '' ? self::stamp($store->get($key)) : null;
        $queues = is_array($req['queues'] ?? null) ? array_slice($req['queues'], 0, 30) : [];
        $paused = [];

        foreach ($queues as $q) {
            $paused[] = is_string($q) && (bool) $store->get('illuminate:queue:paused:'.$q);
        }

        return ['restart' => $restart, 'paused_all' => $queues !== [] && (bool) $store->get('illuminate:queues:paused'),
            'paused' => $paused];
    }

    /** Each queue's size through the app's queue connection (null: the app's default connection). */
    private function sizes(array $req): array
    {
        $name = $req['connection'] ?? null;
        $queue = $this->app['queue']->connection(is_string($name) && $name !== '' ? $name : null);
        $queues = is_array($req['queues'] ?? null) ? array_slice($req['queues'], 0, 30) : [];
        $sizes = [];

        foreach ($queues as $q) {
            $q = is_string($q) ? $q : '';

            if (method_exists($queue, 'pendingSize')) {
                $sizes[] = ['ready' => max(0, (int) $queue->pendingSize($q)),
                    'delayed' => max(0, (int) $queue->delayedSize($q)), 'reserved' => max(0, (int) $queue->reservedSize($q))];
            } else {
                $sizes[] = ['ready' => max(0, (int) $queue->size($q)), 'delayed' => null, 'reserved' => null];
            }
        }

        return ['sizes' => $sizes];
    }

    /** A restart value as a short string (queue:restart stores a timestamp), or null when not set. */
    private static function stamp($value): ?string
    {
        if ($value === null) {
            return null;
        }

        $s = is_scalar($value) ? (string) $value : serialize($value);

        return strlen($s) <= self::VALUE_MAX && preg_match('//u', $s) ? $s : hash('sha256', $s);
    }
}
