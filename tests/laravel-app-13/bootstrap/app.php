<?php

use Illuminate\Foundation\Application;
use Illuminate\Foundation\Configuration\Exceptions;
use Illuminate\Foundation\Configuration\Middleware;

/*
 * The 11+ skeleton's bootstrap/app.php (Application::configure(); no
 * kernels in the app), plus APP_STORAGE as in the other fixture apps:
 * storage (created with the usual sub-dirs) and the bootstrap cache files
 * outside the app directory.
 */

$storage = getenv('APP_STORAGE');

if ($storage !== false && $storage !== '') {
    foreach (['app', 'framework/cache/data', 'framework/sessions', 'framework/views', 'framework/bootstrap-cache', 'logs'] as $dir) {
        if (! is_dir($storage.'/'.$dir)) {
            @mkdir($storage.'/'.$dir, 0777, true);
        }
    }

    foreach ([
        'APP_PACKAGES_CACHE' => 'packages.php',
        'APP_SERVICES_CACHE' => 'services.php',
        'APP_CONFIG_CACHE' => 'config.php',
        'APP_ROUTES_CACHE' => 'routes-v7.php',
        'APP_EVENTS_CACHE' => 'events.php',
    ] as $name => $file) {
        $current = getenv($name);

        if ($current === false || $current === '') {
            $value = $storage.'/framework/bootstrap-cache/'.$file;
            putenv("{$name}={$value}");
            $_ENV[$name] = $_SERVER[$name] = $value;
        }
    }
}

$app = Application::configure(basePath: dirname(__DIR__))
    ->withRouting(
        commands: __DIR__.'/../routes/console.php',
    )
    ->withMiddleware(function (Middleware $middleware): void {
        //
    })
    ->withExceptions(function (Exceptions $exceptions): void {
        // 13.x: the worker fails (does not retry) a job that throws this.
        $exceptions->dontRetry(App\Exceptions\DontRetryException::class);
    })->create();

if ($storage !== false && $storage !== '') {
    $app->useStoragePath($storage);
}

return $app;
