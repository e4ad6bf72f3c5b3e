<?php

/*
 * qpool pipe handler for Laravel apps (protocol: docs/handler-protocol.md).
 *
 *     php /path/to/qpool/php/qpool-handler.php /path/to/laravel/app
 *
 * Boots the app once (its own bootstrap/app.php and console kernel), prints
 * {"type":"ready","protocol":2}, then runs the `job` and `failed` requests
 * qpool writes, one JSON response line each, echoing the request's "seq", the
 * way `php artisan queue:work` runs jobs. The requests come on the descriptor
 * named by QPOOL_REQUEST_FD and the responses go to QPOOL_RESPONSE_FD
 * (protocol 2); without them, on stdin/stdout, which the adapter then moves
 * off descriptors 0 and 1 itself. qpool owns Redis and every retry, backoff,
 * timeout and failure decision. Diagnostics and anything a job prints go to
 * stderr. Exits 0 on EOF of the request channel or after SIGTERM (finishing
 * the current request first; that response says "exiting": true).
 *
 * Environment: QPOOL_PHP_FFI=0 stops the adapter from using ext-ffi's dup2()
 * on the stdin/stdout path (it then closes and reopens them instead).
 */

if (PHP_SAPI !== 'cli') {
    exit(1);
}

require __DIR__.'/src/StdoutToStderr.php';
require __DIR__.'/src/Protocol.php';
require __DIR__.'/src/FailureExceptions.php';
require __DIR__.'/src/Handler.php';
// src/PipeJob.php extends a framework class: Handler loads it after booting the app.

$appPath = $argv[1] ?? '';

// qpool reads an app's queue, Redis and Horizon settings this way (src/Describe.php).
if (in_array($appPath, ['--describe', '--describe-horizon'], true)) {
    require __DIR__.'/src/Describe.php';
    exit(Qpool\Laravel\Describe::main($argv));
}

if ($appPath === '' || in_array($appPath, ['-h', '--help'], true)) {
    fwrite(STDERR, "usage: php qpool-handler.php [--zygote] /path/to/laravel/app\n");
    exit(2);
}

// qpool's master starts one per pool with preload on: boot once, fork handlers (src/Zygote.php).
if ($appPath === '--zygote' && ($argv[2] ?? '') !== '') {
    require __DIR__.'/src/Zygote.php';
    exit((new Qpool\Laravel\Zygote())->run($argv[2]));
}

exit((new Qpool\Laravel\Handler(new Qpool\Laravel\Protocol()))->run($appPath));
