<?php

namespace Qpool\Laravel;

use Illuminate\Contracts\Console\Kernel as ConsoleKernel;

/**
 * Boot a Laravel app as `cd APP && php artisan queue:work` would, for the
 * handler (Handler.php) and for qpool's questions about the app
 * (Describe.php). The caller has checked that $base is an app directory.
 */
final class AppBoot
{
    /** @return object the bootstrapped application */
    public static function boot(string $base)
    {
        chdir($base);

        if (! defined('LARAVEL_START')) {
            define('LARAVEL_START', microtime(true));
        }

        // Code that asks "am I a queue worker?" (runningConsoleCommand, argv) sees queue:work.
        $_SERVER['argv'] = $GLOBALS['argv'] = [$base.'/artisan', 'queue:work'];
        $_SERVER['argc'] = $GLOBALS['argc'] = 2;

        // What artisan requires before bootstrap/app.php.
        foreach (['vendor/autoload.php', 'bootstrap/autoload.php'] as $autoload) {
            if (is_file($base.'/'.$autoload)) {
                require_once $base.'/'.$autoload;
                break;
            }
        }

        $app = require $base.'/bootstrap/app.php';

        if (! is_object($app) || ! method_exists($app, 'make')) {
            throw new \UnexpectedValueException('bootstrap/app.php did not return the application');
        }

        $app->make(ConsoleKernel::class)->bootstrap();

        return $app;
    }
}
