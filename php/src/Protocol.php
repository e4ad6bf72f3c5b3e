<?php

namespace Qpool\Laravel;

/**
 * The pipe protocol's transport: newline-delimited JSON requests and
 * responses (docs/handler-protocol.md).
 *
 * Protocol 2 (qpool 0.2+): qpool hands the adapter the request channel on the
 * descriptor named by QPOOL_REQUEST_FD and the response channel on
 * QPOOL_RESPONSE_FD; stdin is /dev/null and stdout is logged. Nothing a job
 * prints, and nothing a process it starts reads or writes on stdin/stdout,
 * can reach the protocol, in any language and without any PHP extension.
 *
 * Started by an older qpool (or with handler.protocol = 1), the channels are
 * stdin and stdout. The adapter then moves them itself, with plain PHP: it
 * keeps private copies (php://fd/0 and php://fd/1 dup() them), closes STDIN
 * and STDOUT and opens /dev/null and php://stderr, which take descriptors 0
 * and 1 (open() returns the lowest free one). A job's shell_exec('cat') gets
 * EOF at once, and its output goes to stderr.
 *
 * On top of either, an output buffer forwards what PHP itself prints to
 * stderr so that the log keeps its order.
 */
final class Protocol
{
    /** @var resource */
    private $in;

    /** @var resource */
    private $out;

    /** @var string "fds", "moved" or "none" */
    private $isolation = 'none';

    /** @var bool VAR_DUMPER_FORMAT set for the boot (holdDumper) */
    private $dumperHeld = false;

    /** @var array<resource> streams that hold descriptors 0 and 1 in place */
    private $keep = [];

    /** @var string name ob_get_status() reports for our buffer */
    private $bufferName;

    /** @var bool */
    private $warnedBuffer = false;

    /**
     * $streams: the request and response channel as streams (a handler the
     * zygote forked, Zygote.php); null: from the environment or stdio.
     */
    public function __construct(?array $streams = null)
    {
        // PHP's own error display goes to stdout in the CLI by default.
        ini_set('display_errors', 'stderr');

        if ($streams !== null) {
            [$this->in, $this->out] = $streams;
            $this->isolation = 'fds';
            $channel = array_map(function ($s) {
                return self::identity(@fstat($s) ?: null);
            }, $streams);
        } else {
            $channel = $this->protocolPipes();

            if (! $this->openFds()) {
                $this->moveStdio();
            }
        }

        $this->closeOnExec($channel);
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
                return null; // EOF (or a broken channel): the worker has gone
            }

            return $line;
        }
    }

    /**
     * Write one response line (and flush pending job output to stderr
     * first, so the log keeps its order; not from a shutdown function, where
     * PHP may already have dropped the buffers after a fatal error). False
     * when the message could not be encoded and an exception line went instead.
     */
    public function send(array $message, bool $guardOutput = true): bool
    {
        if ($guardOutput) {
            $this->guardOutput();
        }

        $flags = JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PARTIAL_OUTPUT_ON_ERROR;

        if (defined('JSON_INVALID_UTF8_SUBSTITUTE')) {
            $flags |= JSON_INVALID_UTF8_SUBSTITUTE;
        }

        $line = json_encode($message, $flags);
        $encoded = is_string($line);

        if (! $encoded) {
            $line = json_encode(array_intersect_key($message, ['seq' => 1, 'exiting' => 1]) + [
                'status' => 'exception',
                'class' => 'RuntimeException',
                'message' => 'qpool-handler: cannot encode response: '.json_last_error_msg(),
            ]);
        }

        $line .= "\n";

        while ($line !== '') {
            $n = @fwrite($this->out, $line);

            if ($n === false || $n === 0) {
                self::log('cannot write to the protocol channel (qpool has gone); exiting');
                exit(1);
            }

            $line = (string) substr($line, $n);
        }

        fflush($this->out);

        return $encoded;
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
                self::log('a job removed the stdout guard buffer; restored it');
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
     * Protocol 2: the channels qpool named in the environment.
     */
    private function openFds(): bool
    {
        $req = getenv('QPOOL_REQUEST_FD');
        $resp = getenv('QPOOL_RESPONSE_FD');

        if (! is_string($req) || ! is_string($resp) || ! ctype_digit($req) || ! ctype_digit($resp)) {
            return false;
        }

        $in = @fopen('php://fd/'.$req, 'rb');
        $out = @fopen('php://fd/'.$resp, 'wb');

        if (! $in || ! $out) {
            self::log('cannot open the protocol descriptors '.$req.'/'.$resp.'; using stdin/stdout');

            return false;
        }

        $this->in = $in;
        $this->out = $out;
        $this->isolation = 'fds';

        return true;
    }

    /**
     * Protocol on stdin/stdout: keep private copies, then put /dev/null on
     * descriptor 0 and stderr on descriptor 1: with FFI's dup2() when it is
     * there (STDIN and STDOUT stay valid streams), else by closing STDIN and
     * STDOUT and opening /dev/null and php://stderr in their place (a job
     * that writes to the STDOUT constant then gets an error, not the pipe).
     */
    private function moveStdio(): void
    {
        $this->in = STDIN;
        $this->out = STDOUT;

        $in = @fopen('php://fd/0', 'rb');
        $out = @fopen('php://fd/1', 'wb');

        if (! $in || ! $out) {
            self::log('cannot copy stdin/stdout; job output may reach the protocol');

            return;
        }

        fflush(STDOUT);
        $this->in = $in;
        $this->out = $out;

        if (! $this->dup2Stdio()) {
            fclose(STDIN);
            $null = @fopen('/dev/null', 'rb');
            fclose(STDOUT);
            $err = @fopen('php://stderr', 'wb');
            $this->keep = array_filter([$null, $err]);
            $this->holdDumper();
        }

        $null = @stat('/dev/null');
        $moved = $null && self::identity(self::statFd(0)) === self::identity($null)
            && self::identity(self::statFd(1)) === self::identity(self::statFd(2));
        $this->isolation = $moved ? 'moved' : 'none';

        if ($this->isolation === 'none') {
            self::log('could not move stdin/stdout off the protocol; job output may reach it');
        }
    }

    /**
     * With the STDOUT constant closed, Laravel 9+ cannot boot: its
     * FoundationServiceProvider registers a CliDumper whose ConsoleOutput
     * takes STDOUT ("The StreamOutput class needs a stream"). Its "server"
     * format registers none; it is taken back once the app has booted
     * (afterBoot), so that dump() then writes through VarDumper's own
     * CliDumper to php://stdout: descriptor 1, stderr, which qpool logs.
     */
    private function holdDumper(): void
    {
        if (! isset($_SERVER['VAR_DUMPER_FORMAT'])) {
            $_SERVER['VAR_DUMPER_FORMAT'] = 'server';
            $this->dumperHeld = true;
        }
    }

    /** After the app's boot: what holdDumper() set is taken back. */
    public function afterBoot(): void
    {
        if ($this->dumperHeld) {
            unset($_SERVER['VAR_DUMPER_FORMAT']);
            $this->dumperHeld = false;
        }
    }

    private function dup2Stdio(): bool
    {
        if (getenv('QPOOL_PHP_FFI') === '0' || ! class_exists('FFI')) {
            return false;
        }

        try {
            $libc = \FFI::cdef('int open(const char *path, int flags); int dup2(int oldfd, int newfd); int close(int fd);');
            $null = $libc->open('/dev/null', 0);

            if ($null < 0) {
                return false;
            }

            $ok = $libc->dup2($null, 0) === 0 && $libc->dup2(2, 1) === 1;
            $libc->close($null);

            return $ok;
        } catch (\Throwable $e) {
            return false; // FFI disabled (ffi.enable) or libc not found
        }
    }

    /**
     * The pipes the protocol channel's descriptors are (device:inode, as
     * fstat() reports them), before any of them is moved or copied.
     */
    private function protocolPipes(): array
    {
        $fds = [0, 1];
        $req = getenv('QPOOL_REQUEST_FD');
        $resp = getenv('QPOOL_RESPONSE_FD');

        if (is_string($req) && is_string($resp) && ctype_digit($req) && ctype_digit($resp)) {
            $fds = [(int) $req, (int) $resp];
        }

        $pipes = [];

        foreach ($fds as $fd) {
            $st = self::statFd($fd);

            if ($st && ($st['mode'] & 0170000) === 0010000) { // S_IFIFO
                $pipes[] = self::identity($st);
            }
        }

        return $pipes;
    }

    /**
     * Every descriptor of ours on the protocol pipes (the ones qpool passed
     * and PHP's copies of them) is marked close-on-exec, so no process a job
     * starts holds the channel: it could read a request meant for us, or
     * keep the pipe open after we exit. Needs FFI (PHP has no fcntl); without
     * it the descriptors stay inheritable, and we say so once.
     */
    private function closeOnExec(array $pipes): void
    {
        if ($pipes === []) {
            return;
        }

        $libc = null;

        if (getenv('QPOOL_PHP_FFI') !== '0' && class_exists('FFI')) {
            try {
                $libc = \FFI::cdef('int fcntl(int fd, int cmd, ...);');
            } catch (\Throwable $e) {
                $libc = null; // FFI disabled (ffi.enable) or libc not found
            }
        }

        if ($libc === null) {
            self::log('without FFI the protocol descriptors stay open in processes a job starts');

            return;
        }

        foreach (self::descriptors() as $fd) {
            if (in_array(self::identity(self::statFd($fd)), $pipes, true)) {
                $libc->fcntl($fd, 2 /* F_SETFD */, 1 /* FD_CLOEXEC */);
            }
        }
    }

    /**
     * Our open descriptors: from /proc/self/fd, or, where /proc is not
     * mounted (a chroot, a minimal container), every number below 1024,
     * which statFd() then tells open or not (and we say so once).
     */
    public static function descriptors(): array
    {
        $entries = @scandir('/proc/self/fd');

        if (is_array($entries) && in_array('0', $entries, true)) {
            return array_map('intval', array_filter($entries, 'ctype_digit'));
        }

        static $said = false;

        if (! $said) {
            $said = true;
            self::log('no /proc/self/fd (is /proc mounted?): looking for descriptors among 0-1023 by number');
        }

        return range(0, 1023);
    }

    /** fstat() of our descriptor $fd (through a copy: php://fd dup()s it), or null if it is not open. */
    public static function statFd(int $fd): ?array
    {
        $stream = @fopen('php://fd/'.$fd, 'r');

        if (! $stream) {
            return null;
        }

        $st = @fstat($stream);
        fclose($stream);

        return is_array($st) ? $st : null;
    }

    public static function identity(?array $st): ?string
    {
        return $st ? $st['dev'].':'.$st['ino'] : null;
    }
}
