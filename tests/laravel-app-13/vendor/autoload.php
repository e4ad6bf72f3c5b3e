<?php

/*
 * What Composer's vendor/autoload.php gives a real app, built from Debian's
 * packaged framework instead of a vendor/ tree: the framework (and its
 * dependencies and helper files) from /usr/share/php/Illuminate/autoload.php,
 * plus composer.json's "autoload.psr-4" for the app (App\ => app/,
 * Database\ => database/). An app with a real Composer vendor/ needs nothing
 * else from qpool either: the adapter only requires vendor/autoload.php.
 */

$debianPhp = getenv('DEBIAN_PHP_DIR') ?: '/usr/share/php';

if (! is_file($debianPhp.'/Illuminate/autoload.php')) {
    fwrite(STDERR, "Laravel not found in {$debianPhp}: apt-get install php-laravel-framework\n");
    exit(1);
}

require_once $debianPhp.'/Illuminate/autoload.php';

spl_autoload_register(function ($class) {
    static $map = null;

    if ($map === null) {
        $base = dirname(__DIR__);
        $map = [
            'App\\' => $base.'/app/',
            'Database\\' => $base.'/database/',
        ];
    }

    foreach ($map as $prefix => $dir) {
        if (strncmp($class, $prefix, strlen($prefix)) === 0) {
            $file = $dir.str_replace('\\', '/', substr($class, strlen($prefix))).'.php';

            if (is_file($file)) {
                require $file;
            }

            return;
        }
    }
});
