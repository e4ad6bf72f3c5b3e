<?php

namespace Qpool\Laravel;

/**
 * The pipe protocol's transport: newline-delimited JSON, requests on stdin,
 * responses on stdout (docs/handler-protocol.md).
 *
 * stdout belongs to the protocol only. Two layers keep job output off it:
 *
 *  1. Output buffering: an ob_start() handler forwards everything PHP itself
 *     prints (echo, print, var_dump, ...) to stderr. Always on.
 *  2. File descriptors (when ext-ffi is usable): the protocol pipe is dup()ed
 *     to a private descriptor and fd 1 is pointed at stderr with dup2(), so
 *     even writes that bypass output buffering (fwrite(STDOUT), php://stdout,
 *     Symfony ConsoleOutput, child processes, a job that ends our buffer)
 *     land in the log. Disable with QPOOL_PHP_DUP_STDOUT=0.
 */
final class Protocol
{
    /** @var resource */
    private $in;

    /** @var resource */
    private $out;

    /** @var string "dup" or "ob" */
    private $isolation = 'ob';

    /** @var string name ob_get_status() reports for our buffer */
    private $bufferName;

    /** @var bool */
    private $warnedBuffer = false;

    public function __construct()
    {
        // PHP's own error display goes to stdout in the CLI by default.
        ini_set('display_errors', 'stderr');

        $this->in = STDIN;
        $this->out = $this->isolateStdout() ?: STDOUT;
        $this->startBuffer();
    }

    public function isolation(): string
    {
        return $this->isolation;
    }

    /**
     * Read one request line. Returns null on EOF, or when $shouldStop()
     * becomes true while no request is waiting.
     */
    public function readLine(callable $shouldStop): ?string
    {
        while (true) {
            $stopping = (bool) $shouldStop();
            $read = [$this->in];
            $write = $except = null;

            // A 1 s timeout bounds the race between a signal and select();
            // when stopping, only take a request that is already waiting.
            $ready = @stream_select($read, $write, $except, $stopping ? 0 : 1);

            if ($ready === false) {
                // Interrupted by a signal: look at $shouldStop again.
                if (feof($this->in)) {
                    return null;
                }

                usleep(1000);

                continue;
            }

            if ($ready === 0) {
                if ($stopping) {
                    return null;
                }

                continue;
            }

            $line = fgets($this->in);

            if ($line === false) {
                return null; // EOF (or a broken stdin): the worker has gone
            }

            return $line;
        }
    }

    /**
     * Write one response line (and flush pending job output to stderr
     * first, so the log keeps its order; not from a shutdown function, where
     * PHP may already have dropped the buffers after a fatal error).
     */
    public function send(array $message, bool $guardOutput = true): void
    {
        if ($guardOutput) {
            $this->guardOutput();
        }

        $flags = JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PARTIAL_OUTPUT_ON_ERROR;

        if (defined('JSON_INVALID_UTF8_SUBSTITUTE')) {
            $flags |= JSON_INVALID_UTF8_SUBSTITUTE;
        }

        $line = json_encode($message, $flags);

        if (! is_string($line)) {
            $line = json_encode([
                'status' => 'exception',
                'class' => 'RuntimeException',
                'message' => 'qpool-handler: cannot encode response: '.json_last_error_msg(),
            ]);
        }

        $line .= "\n";

        while ($line !== '') {
            $n = @fwrite($this->out, $line);

            if ($n === false || $n === 0) {
                self::log('cannot write to the protocol pipe (qpool has gone); exiting');
                exit(1);
            }

            $line = (string) substr($line, $n);
        }

        fflush($this->out);
    }

    /**
     * Restore our output buffer if a job removed it, and flush buffers a
     * job left open into it (that is, to stderr).
     */
    public function guardOutput(): void
    {
        $levels = ob_get_status(true);
        $ours = null;

        foreach ($levels as $i => $status) {
            if (($status['name'] ?? null) === $this->bufferName) {
                $ours = $i + 1;
                break;
            }
        }

        if ($ours === null) {
            while (ob_get_level() > 0 && @ob_end_flush()) {
                //
            }

            if (! $this->warnedBuffer) {
                $this->warnedBuffer = true;
                self::log('a job removed the stdout guard buffer; restored it'
                    .($this->isolation === 'dup' ? '' : ' (output written meanwhile may have reached the protocol pipe)'));
            }

            $this->startBuffer();
            StdoutToStderr::endLine();

            return;
        }

        while (ob_get_level() > $ours && @ob_end_flush()) {
            //
        }

        StdoutToStderr::endLine();
    }

    public static function log(string $message): void
    {
        @fwrite(STDERR, 'qpool-handler['.getmypid().']: '.$message."\n");
    }

    private function startBuffer(): void
    {
        ob_start(new StdoutToStderr(), 1);
        $status = ob_get_status();
        $this->bufferName = $status['name'] ?? StdoutToStderr::class.'::__invoke';
    }

    /**
     * @return resource|null the protocol stream, or null when fd tricks are unavailable
     */
    private function isolateStdout()
    {
        $env = getenv('QPOOL_PHP_DUP_STDOUT');

        if ($env === '0' || ! class_exists('FFI')) {
            return null;
        }

        try {
            $libc = \FFI::cdef('int dup(int oldfd); int dup2(int oldfd, int newfd); int close(int fd);');

            $fd = $libc->dup(1);

            if ($fd < 0) {
                return null;
            }

            // php://fd/N dup()s N again, so N can be closed afterwards.
            $stream = @fopen('php://fd/'.$fd, 'wb');

            if (! $stream) {
                $libc->close($fd);

                return null;
            }

            $libc->close($fd);

            fflush(STDOUT);

            if ($libc->dup2(2, 1) < 0) {
                fclose($stream);

                return null;
            }

            $this->isolation = 'dup';

            return $stream;
        } catch (\Throwable $e) {
            return null; // FFI disabled (ffi.enable) or libc symbols not found
        }
    }
}
