<?php

namespace Qpool\Laravel;

use Throwable;

require_once __DIR__.'/AppBoot.php';

/**
 * `php qpool-handler.php --describe APP [--connection NAME]` and
 * `--describe-horizon APP`: boot the app the way `php artisan` does and print,
 * as one JSON object on stdout, what qpool needs to know about it (see
 * docs/laravel.md, "Setup read from the app"). Nothing else is written to
 * stdout: whatever the app prints while booting goes to stderr. On failure,
 * the reason goes to stderr and the exit status is 1.
 *
 * Where a value came from: each value carries a "source". The describer reads
 * the config file's text for the env('NAME') keys it uses, and names the key
 * whose value equals the resolved one: "environment (NAME)" when the variable
 * was in the process environment before the app booted, ".env (NAME)" when it
 * is defined in the app's .env file; otherwise the value is the config file's
 * own ("config/database.php"). A cached configuration is reported as
 * "config cache". The match is by value: a config file that computes a value
 * from a variable (rather than using it as is) is reported as the file's.
 */
final class Describe
{
    private const MAX_STRING = 4096;

    /** @var array<string,string> the process environment before the app booted */
    private $processEnv;

    /** @var array<string,string> the app's .env file, parsed */
    private $dotEnv = [];

    /** @var array<string,string[]> config file => env keys its text uses */
    private $fileKeys = [];

    private $app;
    private $base;
    private $cached = false;

    public function __construct(array $processEnv)
    {
        $this->processEnv = $processEnv;
    }

    public static function main(array $argv): int
    {
        $mode = $argv[1];
        $appPath = $argv[2] ?? '';
        $opts = self::options(array_slice($argv, 3));

        if ($appPath === '' || $opts === null) {
            fwrite(STDERR, "usage: php qpool-handler.php --describe APP [--connection NAME]\n"
                ."       php qpool-handler.php --describe-horizon APP\n");

            return 2;
        }

        $d = new self(getenv());
        ob_start(function ($buffer) {
            if ($buffer !== '') {
                @fwrite(STDERR, $buffer);
            }

            return '';
        }, 1);

        try {
            $d->boot($appPath);
            $out = $mode === '--describe-horizon' ? $d->horizon() : $d->describe($opts['connection'] ?? null);
            $json = json_encode($out, JSON_UNESCAPED_SLASHES | JSON_PRESERVE_ZERO_FRACTION);

            if ($json === false) {
                throw new \UnexpectedValueException('cannot encode the description: '.json_last_error_msg());
            }
        } catch (Throwable $e) {
            ob_end_clean();
            $what = $e instanceof \InvalidArgumentException ? '' : get_class($e).': ';
            fwrite(STDERR, self::oneLine($what.$e->getMessage())."\n");

            return 1;
        }

        ob_end_clean();
        fwrite(STDOUT, $json."\n");

        return 0;
    }

    private static function options(array $args): ?array
    {
        $opts = [];

        for ($i = 0; $i < count($args); $i++) {
            if ($args[$i] === '--connection' && isset($args[$i + 1])) {
                $opts['connection'] = $args[++$i];
            } else {
                return null;
            }
        }

        return $opts;
    }

    private static function oneLine(string $s): string
    {
        return substr(preg_replace('/\s+/', ' ', $s), 0, 1000);
    }

    // ------------------------------------------------------------ boot

    private function boot(string $appPath): void
    {
        $base = realpath($appPath);

        if ($base === false || ! is_dir($base)) {
            $who = function_exists('posix_geteuid') && function_exists('posix_getpwuid')
                ? (posix_getpwuid(posix_geteuid())['name'] ?? (string) posix_geteuid()) : 'this user';
            throw new \InvalidArgumentException('no such directory, or not one '.$who.' may enter');
        }

        if (! is_file($base.'/bootstrap/app.php')) {
            throw new \InvalidArgumentException('not a Laravel app (no bootstrap/app.php)');
        }

        $app = AppBoot::boot($base);

        $this->app = $app;
        $this->base = $base;
        $this->cached = method_exists($app, 'configurationIsCached') && $app->configurationIsCached();
        $this->dotEnv = $this->readDotEnv();
    }

    private function readDotEnv(): array
    {
        $file = method_exists($this->app, 'environmentFilePath')
            ? $this->app->environmentFilePath() : $this->base.'/.env';

        if (! is_file($file) || ! class_exists(\Dotenv\Dotenv::class)) {
            return [];
        }

        try {
            return \Dotenv\Dotenv::parse((string) file_get_contents($file));
        } catch (Throwable $e) {
            return [];
        }
    }

    // ------------------------------------------------------------ sources

    private function keysOf(string $file): array
    {
        if (! isset($this->fileKeys[$file])) {
            // 11+: the app's file is merged over the framework's own, whose env() keys count too
            $text = @file_get_contents($this->base.'/config/'.$file.'.php');
            $base = self::frameworkConfig();
            $text .= $base !== null ? (string) @file_get_contents($base.'/'.$file.'.php') : '';
            preg_match_all('/env\(\s*[\'"]([A-Za-z0-9_]+)[\'"]/', (string) $text, $m);
            $this->fileKeys[$file] = array_values(array_unique($m[1] ?? []));
        }

        return $this->fileKeys[$file];
    }

    /**
     * The framework's own config directory, which Laravel 11+ loads under the
     * app's files (LoadConfiguration::getBaseConfiguration()); null before 11.
     */
    private static function frameworkConfig(): ?string
    {
        $class = \Illuminate\Foundation\Bootstrap\LoadConfiguration::class;

        if (! class_exists($class) || ! method_exists($class, 'getBaseConfiguration')) {
            return null;
        }

        $dir = realpath(dirname((string) (new \ReflectionClass($class))->getFileName(), 5).'/config');

        return $dir !== false && is_dir($dir) ? $dir : null;
    }

    /** "config/FILE.php", or the framework's file when the app has none (11+). */
    private function fileOf(string $file): string
    {
        $base = self::frameworkConfig();

        return $base !== null && ! is_file($this->base.'/config/'.$file.'.php') && is_file($base.'/'.$file.'.php')
            ? 'the framework\'s config/'.$file.'.php' : 'config/'.$file.'.php';
    }

    /** The source of a value read from config/FILE.php. */
    private function sourceOf(string $file, $raw): string
    {
        if ($this->cached) {
            return 'config cache';
        }

        if ($raw !== null && ! is_array($raw)) {
            $s = is_bool($raw) ? ($raw ? 'true' : 'false') : (string) $raw;

            foreach ($this->keysOf($file) as $key) {
                if (array_key_exists($key, $this->processEnv) && (string) $this->processEnv[$key] === $s) {
                    return 'environment ('.$key.')';
                }

                if (array_key_exists($key, $this->dotEnv) && (string) $this->dotEnv[$key] === $s
                    && ! array_key_exists($key, $this->processEnv)) {
                    return '.env ('.$key.')';
                }
            }
        }

        return $this->fileOf($file);
    }

    private function value(string $file, $value, $raw = null): array
    {
        if (is_string($value) && strlen($value) > self::MAX_STRING) {
            throw new \LengthException('a value in config/'.$file.'.php is too long');
        }

        return ['value' => $value, 'source' => $this->sourceOf($file, func_num_args() > 2 ? $raw : $value)];
    }

    // ------------------------------------------------------------ describe

    private function config(string $key, $default = null)
    {
        return $this->app['config']->get($key, $default);
    }

    public function describe(?string $connection): array
    {
        $queueConnection = $connection ?? $this->config('queue.default');
        $q = $this->config('queue.connections.'.$queueConnection);

        if (! is_array($q)) {
            throw new \UnexpectedValueException('queue connection "'.$queueConnection.'" is not defined in config/queue.php');
        }

        $driver = (string) ($q['driver'] ?? '');
        $onRedis = $driver === 'redis';

        // Another driver: the app's driver pops (app_driver); qpool's own state goes to the app's Redis
        // "default" when qpool.conf names a Redis. An app that defines none describes no connection.
        $appRedis = $onRedis || is_array($this->config('database.redis.default'));
        $values = [
            'queue_connection' => $this->value('queue', $queueConnection),
            'queue_driver' => $this->value('queue', $driver, []),
        ];

        if ($appRedis) {
            $values['connection'] = $onRedis ? $this->value('queue', $q['connection'] ?? 'default')
                : ['value' => 'default', 'source' => 'qpool\'s own state, only when qpool.conf names a Redis: the'
                    .' app\'s Redis "default" connection'];
        }

        $values += [
            'queue' => $this->value('queue', (string) ($q['queue'] ?? 'default')),
            'retry_after' => $this->value('queue', (int) ($q['retry_after'] ?? 60), $q['retry_after'] ?? null),
            'block_for' => $this->value('queue', isset($q['block_for']) ? (int) $q['block_for'] : null, $q['block_for'] ?? null),
        ];
        $redis = $appRedis ? [($onRedis ? (string) ($q['connection'] ?? 'default') : 'default') => true] : [];

        $values += $this->cacheValues($redis);
        $values += $this->downValues($redis);

        $connections = [];

        foreach (array_keys($redis) as $name) {
            $connections[$name] = $this->redisConnection($name);
        }

        return [
            'qpool_describe' => 1,
            'app' => $this->base,
            'laravel' => method_exists($this->app, 'version') ? $this->app->version() : null,
            'config_cached' => $this->cached,
            'values' => $values,
            'redis' => (object) $connections, // {} when the app defines no Redis
        ];
    }

    private function cacheValues(array &$redis): array
    {
        $store = (string) $this->config('cache.default');
        $s = $this->config('cache.stores.'.$store, []);
        $driver = (string) ($s['driver'] ?? '');
        $out = [
            'cache_store' => $this->value('cache', $store),
            'cache_driver' => $this->value('cache', $driver),
        ];

        if ($driver === 'redis') {
            $conn = (string) ($s['connection'] ?? 'default');
            $redis[$conn] = true;
            $rawPrefix = $s['prefix'] ?? $this->config('cache.prefix');
            $out['cache_connection'] = $this->value('cache', $conn);
            $out['cache_prefix'] = $this->value('cache', $this->storePrefix($store), $rawPrefix);
        }

        return $out;
    }

    private static function shortText(string $s): bool
    {
        return $s !== '' && strlen($s) <= 100 && preg_match('//u', $s) === 1;
    }

    /** The prefix the store puts before its keys, as the store itself applies it. */
    private function storePrefix(string $store): string
    {
        $repo = $this->app['cache']->store($store);

        return (string) $repo->getStore()->getPrefix();
    }

    private function downValues(array &$redis): array
    {
        $driver = 'file';
        $store = null;

        if (method_exists($this->app, 'maintenanceMode')) {
            $driver = (string) $this->config('app.maintenance.driver', 'file');
            $store = $this->config('app.maintenance.store') ?? $this->config('cache.default');
        }

        $out = ['down_driver' => method_exists($this->app, 'maintenanceMode')
            ? $this->value('app', $driver) : ['value' => 'file', 'source' => 'framework (before 10: a file)']];

        if ($driver === 'cache') {
            $s = $this->config('cache.stores.'.$store, []);

            if (($s['driver'] ?? null) !== 'redis') {
                $out['down_store'] = $this->value('app', (string) $store);

                return $out;
            }

            $conn = (string) ($s['connection'] ?? 'default');
            $redis[$conn] = true;
            $out['down_store'] = $this->value('app', (string) $store);
            $out['down_connection'] = $this->value('cache', $conn);
            $out['down_prefix'] = $this->value('cache', $this->storePrefix((string) $store), $s['prefix'] ?? $this->config('cache.prefix'));
        } else {
            $out['down_file'] = ['value' => $this->app->storagePath().'/framework/down', 'source' => 'storage path'];
        }

        return $out;
    }

    private function redisConnection(string $name): array
    {
        $c = $this->config('database.redis.'.$name);

        if (! is_array($c) && is_array($this->config('database.redis.clusters.'.$name))) {
            throw new \UnexpectedValueException('redis connection "'.$name.'" is a Redis Cluster (database.redis.clusters),'
                .' which qpool does not read from the app: leave "laravel" out of this pool and give the cluster in'
                .' qpool.conf (redis = { '.$name.' = { cluster = ["host:port", ...]; ... }; })');
        }

        if (! is_array($c)) {
            throw new \UnexpectedValueException('redis connection "'.$name.'" is not defined in config/database.php');
        }

        $raw = $c;

        if (class_exists(\Illuminate\Support\ConfigurationUrlParser::class)) {
            $c = (new \Illuminate\Support\ConfigurationUrlParser())->parseConfiguration($c);
        }

        $host = (string) ($c['host'] ?? '127.0.0.1');
        $scheme = (string) ($c['scheme'] ?? 'tcp');
        $socket = null;

        if ($scheme === 'unix' || substr($host, 0, 1) === '/' || isset($c['path'])) {
            $socket = (string) ($c['path'] ?? $host);
        }

        $prefix = $c['options']['prefix'] ?? $this->config('database.redis.options.prefix', '');
        $fromUrl = ! empty($raw['url']);

        return [
            'host' => $this->value('database', $socket === null ? $host : null, $fromUrl ? $raw['url'] : $raw['host'] ?? null),
            'port' => $this->value('database', $socket === null ? (int) ($c['port'] ?? 6379) : null, $fromUrl ? $raw['url'] : $raw['port'] ?? null),
            'socket' => $this->value('database', $socket, $fromUrl ? $raw['url'] : $raw['host'] ?? null),
            'db' => $this->value('database', (int) ($c['database'] ?? 0), $fromUrl ? $raw['url'] : $raw['database'] ?? null),
            'username' => $this->value('database', isset($c['username']) && $c['username'] !== '' ? (string) $c['username'] : null, $raw['username'] ?? null),
            'password' => $this->value('database', isset($c['password']) && $c['password'] !== '' ? (string) $c['password'] : null, $raw['password'] ?? null),
            'prefix' => $this->value('database', (string) $prefix),
        ];
    }

    // ------------------------------------------------------------ horizon

    /** Each queue connection's driver ("redis", "database", ...): the import runs the others through the app. */
    private function queueDrivers(): array
    {
        $out = [];

        foreach ((array) $this->config('queue.connections', []) as $name => $c) {
            $driver = is_array($c) ? ($c['driver'] ?? null) : null;

            if (is_string($name) && is_string($driver) && self::shortText($name) && self::shortText($driver)
                && count($out) < 100) {
                $out[$name] = $driver;
            }
        }

        return $out;
    }

    public function horizon(): array
    {
        $h = $this->config('horizon');

        if (! is_array($h)) {
            throw new \UnexpectedValueException('no horizon configuration (config/horizon.php)');
        }

        return [
            'qpool_describe' => 1,
            'app' => $this->base,
            'environment' => (string) $this->config('app.env', 'production'),
            'queue_default' => (string) $this->config('queue.default'),
            'queue_drivers' => $this->queueDrivers(),
            'horizon' => [
                'defaults' => $h['defaults'] ?? [],
                'environments' => $h['environments'] ?? [],
                'waits' => $h['waits'] ?? [],
                'memory_limit' => $h['memory_limit'] ?? null,
                'prefix' => $h['prefix'] ?? null,
                'silenced' => $h['silenced'] ?? [],
                'silenced_tags' => $h['silenced_tags'] ?? [],
            ],
        ];
    }
}
