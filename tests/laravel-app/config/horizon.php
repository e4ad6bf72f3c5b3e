<?php

/*
 * A Horizon config (as published by laravel/horizon 5) for `qpool import
 * horizon`: Horizon itself is not installed; only this file is read.
 */
return [

    'prefix' => env('HORIZON_PREFIX', 'laravel_horizon:'),

    'waits' => [
        'redis:default' => 60,
        'redis:emails' => 30,
    ],

    'memory_limit' => 64,

    'defaults' => [
        'supervisor-1' => [
            'connection' => 'redis',
            'queue' => ['default'],
            'balance' => 'auto',
            'autoScalingStrategy' => 'time',
            'maxProcesses' => 1,
            'maxTime' => 0,
            'maxJobs' => 0,
            'memory' => 128,
            'tries' => 1,
            'timeout' => 60,
            'nice' => 0,
        ],
        'mail' => [
            'connection' => 'redis',
            'queue' => ['emails', 'notifications'],
            'balance' => 'simple',
            'maxProcesses' => 2,
            'tries' => 3,
            'backoff' => [1, 5, 10],
            'timeout' => 30,
        ],
    ],

    'environments' => [
        'production' => [
            'supervisor-1' => [
                'minProcesses' => 1,
                'maxProcesses' => 4,
                'balanceMaxShift' => 2,
                'balanceCooldown' => 1,
                'autoScalingStrategy' => 'size',
            ],
        ],

        'testing' => [
            'supervisor-1' => [
                'maxProcesses' => 2,
                'rest' => 0,
            ],
            'reports' => [
                'connection' => 'redis',
                'queue' => 'reports',
                'balance' => false,
                'processes' => 1,
                'maxJobs' => 500,
                'sleep' => 1,
                'workers_name' => 'reporter',
            ],
        ],

        'local' => [
            'supervisor-1' => [
                'maxProcesses' => 3,
            ],
        ],
    ],
];
