<?php

/*
 * qpool pipe handler for Laravel apps (protocol: docs/handler-protocol.md).
 *
 *     php /path/to/qpool/php/qpool-handler.php /path/to/laravel/app
 *
 * Boots the app once (its own bootstrap/app.php and console kernel), prints
 * {"type":"ready","protocol":1}, then runs the `job` and `failed` requests
 * qpool writes to stdin, one JSON response line each on stdout, the way
 * `php artisan queue:work` runs jobs. qpool owns Redis and every retry,
 * backoff, timeout and failure decision. Diagnostics and anything a job
 * prints go to stderr. Exits 0 on stdin EOF or after SIGTERM (finishing the
 * current request first).
 *
 * Environment: QPOOL_PHP_DUP_STDOUT=0 disables the ext-ffi file-descriptor
 * isolation of stdout (output buffering still applies).
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

if ($appPath === '' || in_array($appPath, ['-h', '--help'], true)) {
    fwrite(STDERR, "usage: php qpool-handler.php /path/to/laravel/app\n");
    exit(2);
}

exit((new Qpool\Laravel\Handler(new Qpool\Laravel\Protocol()))->run($appPath));
