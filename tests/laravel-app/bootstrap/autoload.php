<?php

/*
 * Stand-in for Composer's vendor/autoload.php.
 *
 * Debian's php-laravel-framework installs the framework and its
 * dependencies under /usr/share/php, each with a generated autoload.php.
 * Illuminate/autoload.php requires the autoloaders of every Illuminate
 * component and of their dependencies (Symfony, Carbon, Monolog, ...) and
 * loads the helper files (Foundation/helpers.php, Support/helpers.php, ...).
 */

$debianPhp = getenv('DEBIAN_PHP_DIR') ?: '/usr/share/php';

if (! is_file($debianPhp.'/Illuminate/autoload.php')) {
    fwrite(STDERR, "Laravel not found in {$debianPhp}: apt-get install php-laravel-framework\n");
    exit(1);
}

require_once $debianPhp.'/Illuminate/autoload.php';

/*
 * PSR-4 autoloader for the application itself (what composer.json's
 * "autoload.psr-4" would give): App\ => app/, Database\ => database/.
 */
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
