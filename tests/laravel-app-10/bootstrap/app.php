<?php

/*
 * Create the application (as in the Laravel 10 skeleton), with two additions
 * for tests that want to keep this directory read-only:
 *
 *   APP_STORAGE=/abs/dir   storage path (created with the usual sub-dirs);
 *                          also the default home of the bootstrap cache
 *                          files (packages.php, services.php) unless
 *                          APP_PACKAGES_CACHE / APP_SERVICES_CACHE /
 *                          APP_CONFIG_CACHE / APP_ROUTES_CACHE /
 *                          APP_EVENTS_CACHE are set explicitly.
 */

$storage = getenv('APP_STORAGE');

if ($storage !== false && $storage !== '') {
    foreach (['app', 'framework/cache/data', 'framework/sessions', 'framework/views', 'framework/bootstrap-cache', 'logs'] as $dir) {
        if (! is_dir($storage.'/'.$dir)) {
            @mkdir($storage.'/'.$dir, 0777, true);
        }
    }

    $cacheFiles = [
        'APP_PACKAGES_CACHE' => 'packages.php',
        'APP_SERVICES_CACHE' => 'services.php',
        'APP_CONFIG_CACHE' => 'config.php',
        'APP_ROUTES_CACHE' => 'routes-v7.php',
        'APP_EVENTS_CACHE' => 'events.php',
    ];

    foreach ($cacheFiles as $name => $file) {
        $current = getenv($name);

        if ($current === false || $current === '') {
            $value = $storage.'/framework/bootstrap-cache/'.$file;
            putenv("{$name}={$value}");
            $_ENV[$name] = $_SERVER[$name] = $value;
        }
    }
}

$app = new Illuminate\Foundation\Application(
    $_ENV['APP_BASE_PATH'] ?? dirname(__DIR__)
);

if ($storage !== false && $storage !== '') {
    $app->useStoragePath($storage);
}

$app->singleton(
    Illuminate\Contracts\Http\Kernel::class,
    App\Http\Kernel::class
);

$app->singleton(
    Illuminate\Contracts\Console\Kernel::class,
    App\Console\Kernel::class
);

$app->singleton(
    Illuminate\Contracts\Debug\ExceptionHandler::class,
    App\Exceptions\Handler::class
);

return $app;
