<?php

namespace Qpool\Laravel;

use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Queue\Events\JobExceptionOccurred;
use Illuminate\Queue\Events\JobFailed;
use Illuminate\Queue\Events\JobProcessed;
use Illuminate\Queue\Events\JobProcessing;
use Throwable;

require_once __DIR__.'/AppBoot.php';
require_once __DIR__.'/Events.php';
require_once __DIR__.'/Retries.php';
require_once __DIR__.'/AppDriver.php';
require_once __DIR__.'/Tags.php';

/**
 * The persistent PHP side of qpool's pipe handler for Laravel apps: boots
 * the app once, then runs `job` and `failed` requests the way
 * Illuminate\Queue\Worker (under `php artisan queue:work`) runs jobs,
 * leaving every retry / backoff / timeout decision to qpool.
 */
final class Handler
{
    /** @var Protocol */
    private $io;

    /** @var \Illuminate\Foundation\Application */
    private $app;

    /** @var \Illuminate\Contracts\Events\Dispatcher */
    private $events;

    /** @var callable|null the Worker's resetScope callback */
    private $resetScope;

    /** @var bool set by SIGTERM/SIGINT/SIGQUIT, or after a lost connection */
    private $quit = false;

    /** @var PipeJob|null the job being fired */
    private $current;

    /** @var array|null the request being handled (for the shutdown handler) */
    private $pending;

    /** @var array|null outcome of the immediately preceding `job` request */
    private $last;

    /** @var Events the queue events this Laravel version has */
    private $ev;

    /** @var array|null connection and queue of the first request (WorkerStarting, WorkerStopping) */
    private $worker;

    /** @var int jobs run (WorkerStopping's jobsProcessed) */
    private $jobsProcessed = 0;

    /** @var string|null the directory the app was booted from (the app path resolved then) */
    private $bootedFrom;

    /** @var WorkerLink|null a forked handler's tie to its worker, armed while a request runs */
    private $link;

    /** @var AppDriver|null runs `pop` requests (app_driver pools), made at the first one */
    private $appDriver;

    public function __construct(?Protocol $io = null)
    {
        $this->io = $io;
    }

    /** Boot the app and serve requests until EOF or SIGTERM (a handler that boots itself). */
    public function run(string $appPath): int
    {
        if (! $this->bootApp($appPath)) {
            return 1;
        }

        return $this->serve($this->io, 'booted');
    }

    /**
     * Boot the app (the zygote boots once, then forks handlers that serve()).
     * False when it cannot boot, with the reason logged.
     */
    public function bootApp(string $appPath): bool
    {
        try {
            $this->boot($appPath);
        } catch (Throwable $e) {
            Protocol::log('cannot boot the Laravel app at '.$appPath.': '.self::text($e));

            return false;
        }

        return true;
    }

    /**
     * Before the zygote forks: load what every job needs (the queue event
     * classes and their constructors, the command bus, CallQueuedHandler,
     * the worker options), so that each handler shares it instead of
     * loading its own copy at its first job. Nothing is dispatched or run.
     */
    public function prepareForForks(): void
    {
        foreach (['JobPopping', 'JobPopped', 'Looping', 'JobProcessing', 'JobProcessed', 'JobExceptionOccurred',
            'JobFailed', 'JobAttempted', 'JobReleased', 'JobReleasedAfterException', 'JobTimedOut',
            'WorkerStarting', 'WorkerStopping', 'WorkerInterrupted', 'JobInterrupted'] as $name) {
            $this->ev->has($name);
        }

        $this->workerArgs();

        foreach (['Illuminate\Queue\CallQueuedHandler', 'Illuminate\Contracts\Bus\Dispatcher',
            'Illuminate\Contracts\Queue\Factory', 'Illuminate\Contracts\Cache\Repository'] as $abstract) {
            try {
                $this->app->make($abstract);
            } catch (Throwable $e) {
                // not bound in this app: the job resolves it (or fails) as under queue:work
            }
        }

        foreach (['Illuminate\Pipeline\Pipeline', 'Illuminate\Queue\MaxAttemptsExceededException',
            'Illuminate\Database\DetectsLostConnections', 'Illuminate\Queue\Jobs\JobName',
            'Illuminate\Queue\InteractsWithQueue', 'Illuminate\Bus\Queueable'] as $class) {
            class_exists($class) || trait_exists($class) || interface_exists($class);
        }
    }

    /** @return object the booted application */
    public function app()
    {
        return $this->app;
    }

    /** The directory the app was booted from: the app path as it resolved at boot. */
    public function bootedFrom(): ?string
    {
        return $this->bootedFrom;
    }

    /** A forked handler: its worker's death ends the request it runs (WorkerLink). */
    public function linkToWorker(?WorkerLink $link): void
    {
        $this->link = $link;
    }

    /**
     * Say ready on $io, then answer requests until EOF or a stop signal.
     * $how ("booted", "forked by zygote N") goes in the log line; a
     * handler the zygote $forked also says its pid.
     */
    public function serve(Protocol $io, string $how, bool $forked = false): int
    {
        $this->io = $io;
        $this->listenForSignals();
        register_shutdown_function([$this, 'onShutdown']);

        Protocol::log(sprintf('Laravel %s %s from %s (protocol channel: %s)',
            $this->app->version(), $how, $this->app->basePath(), $this->io->isolation()));

        // "pid" lets qpool find a handler it did not start itself (a zygote's fork); "pop_run": a pop
        // request with "run" is answered "popped", then with the run's outcome (one round trip a job).
        $this->io->send(['type' => 'ready', 'protocol' => 2, 'pop_run' => true] + ($forked ? ['pid' => getmypid()] : []));

        $self = $this;

        while (true) {
            $line = $this->io->readLine(function () use ($self) {
                return $self->quit;
            });

            if ($line === null) {
                break;
            }

            if (trim($line) === '') {
                continue;
            }

            $response = $this->handleLine($line);
            $response = $response === null ? null : $this->answer($response); // null: answered already
            $this->pending = null;

            if ($response !== null) {
                $this->io->send($response);
            }
        }

        $this->stop();

        return 0;
    }

    /**
     * Shutdown function: a job that calls exit() or dies of a fatal error
     * still gets its one response, so qpool records why.
     */
    public function onShutdown(): void
    {
        if ($this->pending === null) {
            return;
        }

        $type = $this->pending['type'] ?? null;
        $this->quit = true; // this process is ending: its response says so
        $error = error_get_last();

        if ($type === 'failed') {
            $this->io->send($this->answer(['status' => 'ok', 'error' => 'the handler exited while running failure hooks']), false);
            $this->pending = null;

            return;
        }

        $message = $error && in_array($error['type'], [E_ERROR, E_PARSE, E_CORE_ERROR, E_COMPILE_ERROR, E_USER_ERROR], true)
            ? sprintf('%s in %s:%d', $error['message'], $error['file'], $error['line'])
            : 'the job ended the PHP process (exit)';

        $this->io->send($this->answer([
            'status' => 'exception',
            'class' => 'qpool\HandlerExited',
            'message' => self::utf8($message),
            'exception' => self::utf8('qpool\HandlerExited: '.$message),
        ]), false);
        $this->pending = null;
    }

    /**
     * A response names the request it answers ("seq"), and says when it is
     * this process's last one ("exiting": a job called exit(), a fatal
     * error, a lost connection, SIGTERM), so qpool starts a fresh handler
     * before it sends anything else.
     */
    private function answer(array $response): array
    {
        $seq = $this->pending['seq'] ?? null;

        if (is_int($seq) || is_float($seq)) {
            $response = ['seq' => $seq] + $response;
        }

        if ($this->quit) {
            $response['exiting'] = true;
        }

        return $response;
    }

    // ------------------------------------------------------------ boot

    private function boot(string $appPath): void
    {
        $base = realpath($appPath);

        if ($base === false || ! is_file($base.'/bootstrap/app.php')) {
            throw new \InvalidArgumentException('not a Laravel app (no bootstrap/app.php): '.$appPath);
        }

        $this->bootedFrom = $base;
        $app = AppBoot::boot($base);

        if ($this->io !== null) { // a zygote boots before any channel exists
            $this->io->afterBoot();
        }

        require_once __DIR__.'/PipeJob.php';
        Tags::install($app);

        $this->app = $app;
        $this->events = $app['events'];
        $this->ev = new Events($this->events, function (Throwable $e) {
            $this->report($e);
        });
        $this->resetScope = $this->findResetScope();

        $app = $this->app;

        // Our bookkeeping first, so it runs even if the failer throws.
        $this->events->listen(JobFailed::class, function ($event) {
            if ($event->job instanceof PipeJob) {
                $event->job->recordFailedEvent($event->exception);
            }
        });

        // WorkCommand::listenForEvents() -> logFailedJob(): the failed_jobs row.
        $this->events->listen(JobFailed::class, function ($event) use ($app) {
            $app['queue.failer']->log(
                $event->connectionName,
                $event->job->getQueue(),
                $event->job->getRawBody(),
                $event->exception
            );
        });
    }

    /**
     * The resetScope callback QueueServiceProvider gives the Worker (8.x:
     * log context, scoped instances, resolved facades; later versions add
     * more). Read from the Worker itself so it always matches the version.
     */
    private function findResetScope(): ?callable
    {
        try {
            $worker = $this->app->make('queue.worker');
            $scope = (function () {
                return property_exists($this, 'resetScope') ? $this->resetScope : null;
            })->call($worker);

            if (is_callable($scope)) {
                return $scope;
            }
        } catch (Throwable $e) {
            Protocol::log('no queue.worker resetScope, using the fallback: '.$e->getMessage());
        }

        $app = $this->app;

        return function () use ($app) {
            if (method_exists($app['log']->driver(), 'withoutContext')) {
                $app['log']->withoutContext();
            }

            if (method_exists($app, 'forgetScopedInstances')) {
                $app->forgetScopedInstances();
            }

            \Illuminate\Support\Facades\Facade::clearResolvedInstances();
        };
    }

    private function listenForSignals(): void
    {
        if (! function_exists('pcntl_async_signals') || ! function_exists('pcntl_signal')) {
            return;
        }

        pcntl_async_signals(true);

        $self = $this;
        $handler = function ($signal) use ($self) {
            $self->interrupted((int) $signal);
        };

        foreach (['SIGTERM', 'SIGINT', 'SIGQUIT'] as $name) {
            if (defined($name)) {
                pcntl_signal(constant($name), $handler);
            }
        }
    }

    /**
     * Finish the current request, then exit 0. Like Worker::listenForSignals
     * (13.x: WorkerInterrupted, and an Interruptible job is told, then
     * JobInterrupted).
     */
    public function interrupted(int $signal): void
    {
        $this->quit = true;
        $this->ev->raise('WorkerInterrupted', ['signal' => $signal] + $this->workerArgs());

        try {
            $job = $this->current;
            $interface = 'Illuminate\Contracts\Queue\Interruptible';

            if ($job && interface_exists($interface)) {
                $handler = $job->getResolvedJob();

                if (is_object($handler) && method_exists($handler, 'getRunningCommand')) {
                    $command = $handler->getRunningCommand();

                    if ($command instanceof $interface) {
                        $command->interrupted($signal);
                        $this->ev->raise('JobInterrupted', [
                            'connectionName' => $job->getConnectionName(), 'job' => $job, 'signal' => $signal,
                        ]);
                    }
                }
            }
        } catch (Throwable $e) {
            Protocol::log('interrupting the job failed: '.$e->getMessage());
        }
    }

    private function stop(): void
    {
        $this->ev->raise('WorkerStopping', ['status' => 0, 'jobsProcessed' => $this->jobsProcessed] + $this->workerArgs());

        try {
            $this->app->terminate();
        } catch (Throwable $e) {
            $this->report($e);
        }
    }

    // ------------------------------------------------------------ requests

    private function handleLine(string $line): ?array
    {
        $previous = $this->last;
        $this->last = null;

        $request = json_decode($line, true);

        if (! is_array($request)) {
            Protocol::log('malformed request line ('.json_last_error_msg().'): '.substr(rtrim($line), 0, 200));

            return self::exceptionResponse(new \InvalidArgumentException(
                'qpool-handler: malformed request line: '.json_last_error_msg()
            ));
        }

        $this->pending = $request;

        if ($this->link !== null) {
            $this->link->arm();
        }

        try {
            switch ($request['type'] ?? null) {
                case 'job':
                    return $this->runJob($request);

                case 'failed':
                    return $this->runFailed($request, $previous);

                case 'pop':
                    $this->beforePop($request);
                    $response = $this->appDriver->pop($request, $this->quit);
                    $this->jobsProcessed += isset($response['job']) ? 1 : 0;

                    if (! empty($request['run']) && $this->appDriver->holding()) {
                        // one round trip: "popped" now (qpool arms its timer), the outcome as the second answer;
                        // run only if qpool read "popped" (else it read an exception and asks again)
                        if ($this->io->send($this->answer($response))) {
                            return $this->appDriver->run($this->quit);
                        }

                        $this->appDriver->forget();

                        return null;
                    }

                    return $response;

                case 'run':
                    $this->appDriver = $this->appDriver ?? new AppDriver($this->app);

                    return $this->appDriver->run($this->quit);

                default:
                    Protocol::log('unknown request type '.json_encode($request['type'] ?? null));

                    return self::exceptionResponse(new \InvalidArgumentException(
                        'qpool-handler: unknown request type '.json_encode($request['type'] ?? null)
                    ));
            }
        } catch (Throwable $e) {
            // Never let a broken job (or a bug here) take the handler down.
            $this->report($e);

            if (($request['type'] ?? null) === 'failed') {
                return ['status' => 'ok', 'error' => self::utf8(self::text($e))];
            }

            return self::exceptionResponse($e);
        } finally {
            $this->current = null;

            if ($this->link !== null) {
                $this->link->disarm();
            }

            $this->io->guardOutput();
        }
    }

    /**
     * Worker::process(): JobProcessing, fire, JobProcessed (13.x: then
     * JobReleased if the job released itself); on a Throwable
     * handleJobException (13.x: fail at once if the exception handler says
     * shouldStopRetries; JobExceptionOccurred; JobReleasedAfterException if
     * qpool will release it) and a report (runJob); JobAttempted after all.
     */
    private function runJob(array $request): array
    {
        $job = $this->makeJob($request);
        $connection = $job->getConnectionName();

        $this->popped($job);

        $this->current = $job;
        $thrown = null;
        Tags::$command = null;

        try {
            $this->events->dispatch(new JobProcessing($connection, $job));

            $job->fire();

            $this->events->dispatch(new JobProcessed($connection, $job));

            if ($job->isReleased() && ! $job->isDeleted()) {
                $this->ev->raise('JobReleased', ['connectionName' => $connection, 'job' => $job]);
            }
        } catch (Throwable $e) {
            $thrown = $e;
            $this->jobException($job, $e, $request);
        } finally {
            $this->current = null;
            $this->jobAttempted($connection, $job, $thrown);
        }

        if ($thrown) {
            $this->reportJobException($thrown);
            $this->stopIfLostConnection($thrown);
        }

        $response = $this->outcome($job, $thrown) + $this->tags($job);

        $this->last = [
            'id' => $request['id'] ?? null,
            'uuid' => $request['uuid'] ?? null,
            'exception' => $thrown,
            'hooks_done' => $response['status'] === 'failed',
        ];

        return $response;
    }

    /**
     * The job's tags for its history record, unless its payload has its own
     * (Horizon's), whether it is silenced (Horizon's Silenced interface), and
     * its batch id (Bus::batch) when it has one.
     */
    private function tags(PipeJob $job): array
    {
        $payload = $job->payload();
        $flags = Tags::flags($payload);
        $tags = Tags::take();

        return ($tags && ! isset($payload['tags']) ? ['tags' => $tags] : []) + $flags;
    }

    /**
     * What Worker::daemon() does before it runs a popped job: WorkerStarting
     * (once), Looping (daemonShouldRun; a listener returning false would
     * pause the worker, but the job is already reserved here, so that answer
     * is ignored), resetScope, JobPopping and JobPopped.
     */
    private function popped(PipeJob $job): void
    {
        $connection = $job->getConnectionName();
        $queue = $job->getQueue();

        if ($this->worker === null) {
            $this->worker = ['connectionName' => $connection, 'queue' => $queue];
            $this->ev->raise('WorkerStarting', $this->workerArgs());
        }

        $this->ev->until('Looping', ['connectionName' => $connection, 'queue' => $queue] + $this->workerArgs());
        $this->resetScope();
        $this->ev->raise('JobPopping', ['connectionName' => $connection, 'queue' => $queue]);
        $this->ev->raise('JobPopped', ['connectionName' => $connection, 'job' => $job]);
        $this->jobsProcessed++;
    }

    /**
     * What Worker::daemon() does before each getNextJob: WorkerStarting
     * (once), Looping, resetScope. (getNextJob raises JobPopping and
     * JobPopped itself on the versions that have them.)
     */
    private function beforePop(array $request): void
    {
        $connection = (string) ($request['connection'] ?? '');
        $queue = implode(',', array_map('strval', (array) ($request['queues'] ?? [])));

        if ($this->worker === null) {
            $this->worker = ['connectionName' => $connection, 'queue' => $queue];
            $this->ev->raise('WorkerStarting', $this->workerArgs());
        }

        $this->ev->until('Looping', ['connectionName' => $connection, 'queue' => $queue] + $this->workerArgs());
        $this->resetScope();
        $this->appDriver = $this->appDriver ?? new AppDriver($this->app);
    }

    /** @var \Illuminate\Queue\WorkerOptions|null the worker options the events carry (defaults; made once) */
    private $options;

    /** Connection, queue and default worker options for the worker-level events. */
    private function workerArgs(): array
    {
        if ($this->options === null && class_exists('Illuminate\Queue\WorkerOptions')) {
            $this->options = new \Illuminate\Queue\WorkerOptions();
        }

        return ($this->worker ?? ['connectionName' => null, 'queue' => null]) + ['workerOptions' => $this->options];
    }

    /** Worker::handleJobException(), less the tries / maxExceptions decisions qpool makes. */
    private function jobException(PipeJob $job, Throwable $e, array $request): void
    {
        $connection = $job->getConnectionName();

        if (! $job->hasFailed() && $this->shouldStopRetries($e)) {
            $this->failNow($job, $e);
        }

        try {
            $this->events->dispatch(new JobExceptionOccurred($connection, $job, $e));
        } catch (Throwable $listenerError) {
            $this->report($listenerError);
        }

        if ($this->ev->has('JobReleasedAfterException') && Retries::willRelease($this->app, $job, $request)) {
            $this->ev->raise('JobReleasedAfterException', [
                'connectionName' => $connection, 'job' => $job,
                'backoff' => Retries::backoff($job), 'exception' => $e,
            ]);
        }
    }

    /** 13.x: the app's exception handler lists it in dontRetry() (Worker::markJobAsFailedIfItShouldntBeRetried). */
    private function shouldStopRetries(Throwable $e): bool
    {
        try {
            $handler = $this->app[ExceptionHandler::class];

            return method_exists($handler, 'shouldStopRetries') && $handler->shouldStopRetries($e);
        } catch (Throwable $error) {
            $this->report($error);

            return false;
        }
    }

    /** Worker::failJob(): the failed() hook and JobFailed now; the response then says "failed". */
    private function failNow(PipeJob $job, Throwable $e): void
    {
        try {
            $job->fail($e);
        } catch (Throwable $hookError) {
            $this->report($hookError);
        }
    }

    private function outcome(PipeJob $job, ?Throwable $thrown): array
    {
        // The job failed itself ($this->fail(), or CallQueuedHandler for a
        // missing model): Job::fail already ran failed() and JobFailed.
        if ($job->failedEventSeen) {
            $e = $job->failedEventException;

            return ['status' => 'failed', 'hooks_done' => true] + ($e instanceof Throwable
                ? self::describe($e)
                : ['class' => null, 'message' => null, 'exception' => null]);
        }

        if ($thrown) {
            // Deleted and then threw: Laravel neither releases nor fails a
            // deleted job (Job::fail returns early), so it is gone.
            if ($job->isDeleted()) {
                Protocol::log(sprintf('job %s threw after deleting itself; treating it as done: %s',
                    $job->getJobId() ?? '?', $thrown->getMessage()));

                return ['status' => 'done'];
            }

            // Released and then threw is reported as an exception too: qpool
            // applies tries / maxExceptions and its own backoff.
            return self::exceptionResponse($thrown);
        }

        if ($job->isReleased()) {
            return ['status' => 'released', 'delay' => (int) $job->releaseDelay];
        }

        // Deleted (CallQueuedHandler deletes after success) or not touched:
        // either way the job is acknowledged.
        return ['status' => 'done'];
    }

    /**
     * The job has finally failed: Job::fail($e) runs the job's failed() hook
     * (CallQueuedHandler::failed), then JobFailed (-> failed_jobs row).
     */
    private function runFailed(array $request, ?array $previous): array
    {
        $reason = (string) ($request['reason'] ?? '');
        $sameJob = $previous !== null
            && ($previous['id'] ?? null) === ($request['id'] ?? null)
            && ($previous['uuid'] ?? null) === ($request['uuid'] ?? null);

        if ($reason === 'job_failed' && $sameJob && $previous['hooks_done']) {
            return ['status' => 'ok', 'note' => 'failure hooks already ran'];
        }

        $job = $this->makeJob($request);
        $connection = $job->getConnectionName();
        $e = FailureExceptions::forRequest($job, $request, $sameJob ? $previous['exception'] : null);

        if ($reason !== 'already_exceeded') {
            $this->resetScope();
        }

        // For already_exceeded, queue:work raises JobProcessing, fails the job
        // (markJobAsFailedIfAlreadyExceedsMaxAttempts), then handles the
        // exception it throws like any other (JobExceptionOccurred, report).
        $exceeded = $reason === 'already_exceeded';
        $error = null;

        if ($exceeded) {
            $this->popped($job);
        }

        // The Worker's SIGALRM handler raises JobTimedOut before failing a timed-out job.
        if ($reason === 'timeout' || $reason === 'fail_on_timeout') {
            $this->ev->raise('JobTimedOut', ['connectionName' => $connection, 'job' => $job]);
        }

        $this->current = $job;

        try {
            if ($exceeded) {
                $this->events->dispatch(new JobProcessing($connection, $job));
            }

            $job->fail($e);
        } catch (Throwable $hookError) {
            $error = $hookError;
            $this->report($hookError);
        } finally {
            $this->current = null;
        }

        if ($exceeded) {
            try {
                $this->events->dispatch(new JobExceptionOccurred($connection, $job, $e));
            } catch (Throwable $listenerError) {
                $this->report($listenerError);
            }

            $this->jobAttempted($connection, $job, $e);
            $this->reportJobException($e);
        }

        if ($error) {
            $this->stopIfLostConnection($error);

            return ['status' => 'ok', 'error' => self::utf8(self::text($error))];
        }

        return ['status' => 'ok'];
    }

    private function makeJob(array $request): PipeJob
    {
        $payload = $request['payload'] ?? null;

        if (! is_string($payload)) {
            throw self::noPayload();
        }

        $id = $request['id'] ?? null;

        $job = new PipeJob(
            $this->app,
            $payload,
            is_scalar($id) ? (string) $id : null,
            (int) ($request['attempts'] ?? 1),
            is_string($request['connection'] ?? null) ? $request['connection'] : 'redis',
            is_string($request['queue'] ?? null) ? $request['queue'] : 'default'
        );

        if (! is_array($job->payload())) { // PipeJob decodes it once
            throw self::noPayload();
        }

        return $job;
    }

    private static function noPayload(): \InvalidArgumentException
    {
        return new \InvalidArgumentException('qpool-handler: the request has no valid "payload" (a JSON object as a string)');
    }

    // ------------------------------------------------------------ helpers

    private function resetScope(): void
    {
        if ($this->resetScope === null) {
            return;
        }

        try {
            ($this->resetScope)();
        } catch (Throwable $e) {
            $this->report($e);
        }
    }

    /** JobAttempted (12.x: bool exceptionOccurred; 13.x: ?Throwable exception), after every attempt. */
    private function jobAttempted(string $connection, $job, ?Throwable $e): void
    {
        $this->ev->raise('JobAttempted', [
            'connectionName' => $connection, 'job' => $job, 'exception' => $e, 'exceptionOccurred' => $e !== null,
        ]);
    }

    /** Worker::runJob() reports what the job threw (13.x: unless Worker::$reportJobExceptions is false). */
    private function reportJobException(Throwable $e): void
    {
        $worker = 'Illuminate\Queue\Worker';

        if (property_exists($worker, 'reportJobExceptions') && $worker::$reportJobExceptions === false) {
            return;
        }

        $this->report($e);
    }

    private function report(Throwable $e): void
    {
        try {
            $this->app[ExceptionHandler::class]->report($e);
        } catch (Throwable $reportError) {
            Protocol::log('exception handler failed ('.$reportError->getMessage().') reporting: '.self::text($e));
        }
    }

    /** Worker::stopWorkerIfLostConnection(): exit after this response; qpool starts a fresh handler. */
    private function stopIfLostConnection(Throwable $e): void
    {
        if (! trait_exists('Illuminate\Database\DetectsLostConnections')) {
            return;
        }

        $detector = new class {
            use \Illuminate\Database\DetectsLostConnections {
                causedByLostConnection as public;
            }
        };

        try {
            if ($detector->causedByLostConnection($e)) {
                Protocol::log('lost a connection ('.$e->getMessage().'); exiting after this request');
                $this->quit = true;
            }
        } catch (Throwable $ignored) {
            //
        }
    }

    private static function exceptionResponse(Throwable $e): array
    {
        return ['status' => 'exception'] + self::describe($e);
    }

    private static function describe(Throwable $e): array
    {
        return [
            'class' => get_class($e),
            'message' => self::utf8((string) $e->getMessage()),
            'exception' => self::utf8(self::text($e)),
        ];
    }

    /** (string) $e, as the failer stores it. */
    private static function text(Throwable $e): string
    {
        try {
            return (string) $e;
        } catch (Throwable $inner) {
            return get_class($e).': '.$e->getMessage();
        }
    }

    /** Laravel >= 9.2 stores mb_convert_encoding($text, 'UTF-8'); the protocol needs valid UTF-8 anyway. */
    private static function utf8(string $s): string
    {
        return function_exists('mb_convert_encoding') ? (string) mb_convert_encoding($s, 'UTF-8') : $s;
    }
}
