<?php

use Illuminate\Support\Str;

return [

    // The worker's restart / maxExceptions keys live in this store.
    'default' => env('CACHE_DRIVER', 'redis'),

    'stores' => [

        'array' => [
            'driver' => 'array',
            'serialize' => false,
        ],

        // the table: tests/integration/test_agent.py creates it (as `php artisan cache:table` would)
        'database' => [
            'driver' => 'database',
            'table' => 'cache',
            'connection' => null,
        ],

        'file' => [
            'driver' => 'file',
            'path' => storage_path('framework/cache/data'),
        ],

        'redis' => [
            'driver' => 'redis',
            'connection' => 'cache',
            'lock_connection' => 'default',
        ],

    ],

    /*
     * 8.x skeleton: Str::slug(APP_NAME, '_').'_cache' = 'laravel_cache';
     * RedisStore appends ':' so keys look like
     * laravel_database_laravel_cache:illuminate:queue:restart (Redis DB 1).
     */
    'prefix' => env('CACHE_PREFIX', Str::slug(env('APP_NAME', 'laravel'), '_').'_cache'),

];
