<?php

namespace Qpool\Laravel;

use Throwable;

require_once __DIR__.'/Handler.php';
require_once __DIR__.'/Connections.php';
require_once __DIR__.'/WorkerLink.php';
require_once __DIR__.'/Agent.php';
require_once __DIR__.'/AgentFailed.php';

/**
 * The zygote (`php qpool-handler.php --zygote APP`, started by qpool's
 * master for a pool with preload on): boots the app once, closes every
 * connection the boot opened, then forks one handler per request a worker
 * sends on the datagram socket QPOOL_ZYGOTE_FD. A request carries the
 * worker's end of its channels as SCM_RIGHTS descriptors (stderr, the stdout
 * log pipe, the request pipe, the response pipe); the forked handler says
 * ready, with its pid, on the response pipe, exactly as a handler that
 * booted itself. The worker's stderr may be a socket (systemd's journal):
 * PHP receives a socket as a \Socket, not a stream. See
 * docs/architecture.md, "Preloading the app".
 *
 * Exit status: 0 after SIGTERM; EX_NO_PRELOAD when this app cannot be shared
 * by forks here (an extension is missing, or the boot leaves a connection
 * open: qpool then boots each handler on its own); EX_APP_MOVED when the app
 * path now resolves to another directory (a deploy swapped a symlink: qpool
 * boots a new zygote and rolls the pool onto it); 1 when the app does not
 * boot, or ends the process while it boots (whatever status it exits with:
 * 75 or 76 from the app's code must not read as ours).
 */
final class Zygote
{
    public const EX_NO_PRELOAD = 75;
    public const EX_APP_MOVED = 76;

    /** The JIT buffer asked for where PHP sets none (PHP 8.4's default; shared, and only pages used count) */
    private const JIT_BUFFER = '64M';

    private const FD_COUNT = 4; // stderr, stdout log, requests, responses

    /** @var \Socket */
    private $sock;

    /** @var Handler */
    private $handler;

    /** @var \FFI */
    private $libc;

    /** @var bool */
    private $quit = false;

    /** @var resource */
    private $sockStream;

    /** @var string|null our socket's identity (device:inode) */
    private $sockId;

    /** @var string the app path as configured, and what it resolved to at boot */
    private $appPath;
    private $base;

    /** @var float when the app path and qpool are next looked at (microtime) */
    private $nextCheck = 0.0;

    /** @var bool the app is booting: an exit now is the boot's failure */
    private $booting = false;

    public function run(string $appPath): int
    {
        ini_set('display_errors', 'stderr');
        $this->appPath = $appPath;
        $this->withOpcache($appPath);

        if (($missing = $this->requirements()) !== null) {
            Protocol::log('cannot preload the app here ('.$missing.'); qpool boots each handler on its own');

            return self::EX_NO_PRELOAD;
        }

        if (! $this->openSocket()) {
            return self::EX_NO_PRELOAD;
        }

        $started = microtime(true);
        // What the boot prints goes to stderr, as a handler's does.
        ob_start(new StdoutToStderr(), 1);
        $this->handler = new Handler();

        if (! $this->bootOnce($appPath)) {
            return 1;
        }

        // what the app path resolved to when it booted (not basePath(): an
        // app may name itself by another path, APP_BASE_PATH through a link)
        $this->base = $this->handler->bootedFrom();
        $this->handler->prepareForForks();
        $open = $this->closeConnections();

        if ($open !== []) {
            Protocol::log('the app keeps connections open after boot ('.implode('; ', $open).'): forked handlers '
                .'would share them, so qpool boots each handler on its own. Open them lazily (not in a service '
                .'provider\'s boot) to preload this app');

            return self::EX_NO_PRELOAD;
        }

        Protocol::log(sprintf('zygote: Laravel %s booted from %s in %.0f ms; forking handlers from it',
            $this->handler->app()->version(), $this->base, (microtime(true) - $started) * 1000));

        $this->releaseBootPages();

        return $this->loop();
    }

    private const MADV_DONTNEED = 4;

    /**
     * Unmap the pages of code and read-only data (the PHP binary's, its
     * libraries', the extensions') that only the boot touched. The zygote
     * runs no job, yet they counted 15 MiB of its PSS with PHP 8.4: a forked
     * handler never inherits them (fork copies no page table entry of a
     * file's mapping; a handler maps what it runs, when it runs it), so they
     * were the zygote's alone. MADV_DONTNEED on a private, read-only mapping
     * of a file that holds no modified (anonymous) page only drops our page
     * table entries: the pages stay in the page cache and come back on the
     * next touch. A writable mapping, or one with a modified page (a
     * relocated GOT), is left alone: there it would throw the change away.
     * No privilege needed (MADV_PAGEOUT would want write access to the
     * files). Returns the number of mappings released, or -1.
     */
    private function releaseBootPages(): int
    {
        $smaps = @file('/proc/self/smaps', FILE_IGNORE_NEW_LINES);

        if ($smaps === false) {
            return -1;
        }

        $todo = [];
        $cur = null;

        foreach ($smaps as $line) {
            // start-end perms offset dev inode path: a file has an inode and a path
            if (preg_match('/^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(\S.*)?$/', $line, $m)) {
                $file = isset($m[5]) && $m[4] !== '0' && $m[5][0] === '/' && strpos($m[5], '/dev/') !== 0;
                $cur = $file && $m[3][0] === 'r' && $m[3][1] === '-' && $m[3][3] === 'p'
                    ? [hexdec($m[1]), hexdec($m[2])] : null;
            } elseif ($cur !== null && preg_match('/^Anonymous:\s+(\d+)/', $line, $m)) {
                if ($m[1] === '0') {
                    $todo[] = $cur;
                }
                $cur = null;
            }
        }

        $n = 0;

        foreach ($todo as [$start, $end]) {
            $n += $this->libc->madvise($this->libc->cast('void *', $start), $end - $start, self::MADV_DONTNEED) === 0 ? 1 : 0;
        }

        return $n;
    }

    /**
     * Boot the app; an exit() in its code (or a fatal error) while it boots
     * ends the zygote with status 1, a failed boot, whatever status it gave.
     */
    private function bootOnce(string $appPath): bool
    {
        $this->booting = true;
        register_shutdown_function(function () {
            if ($this->booting) {
                Protocol::log('zygote: the app ended the process while it booted');
                exit(1);
            }
        });
        $booted = $this->handler->bootApp($appPath);
        $this->booting = false;

        return $booted;
    }

    /**
     * With OPcache on, the compiled code lives in its shared memory, which
     * every fork shares and none copies (each handler then copies about
     * 0.7 MiB as it works instead of 2), and a class one handler loads is
     * there for its siblings. The CLI turns it off unless opcache.enable_cli
     * is set, which only the command line or php.ini can do: so the zygote
     * runs itself again with -d opcache.enable_cli=1, once.
     * QPOOL_ZYGOTE_OPCACHE=0 keeps PHP's own setting.
     *
     * QPOOL_ZYGOTE_JIT=1 also turns on OPcache's tracing JIT where PHP's
     * settings leave it off (no buffer before PHP 8.4, "disable" since): it
     * compiles the hot per-job path into the same shared memory, so what one
     * handler compiles its siblings run, and a handler spends about a fifth
     * less CPU per job, for 5 to 12 MiB more in the pool (docs/benchmarks.md).
     * Not the default: it would take a pool of 8 Laravel 13 handlers past
     * 50 MiB of PSS.
     */
    private function withOpcache(string $appPath): void
    {
        $jit = getenv('QPOOL_ZYGOTE_JIT') === '1';
        $ran = getenv('QPOOL_ZYGOTE_OPCACHE');

        if ($ran !== false || ! extension_loaded('Zend OPcache') || ! function_exists('pcntl_exec') || PHP_BINARY === '') {
            if ($jit) {
                self::sayIfNoJit($ran === '1' ? 'PHP runs without it: see opcache.* in its settings'
                    : ($ran !== false ? 'QPOOL_ZYGOTE_OPCACHE keeps PHP\'s own settings' : 'no OPcache or pcntl_exec here'));
            }

            return;
        }

        $options = self::opcacheOptions($jit);

        if ($options === []) {
            if ($jit) {
                self::sayIfNoJit('PHP\'s settings ask for it: see opcache.* and extensions such as Xdebug');
            }

            return;
        }

        // the same command line (its -d options, the script, its arguments), with the options first
        $argv = explode("\0", rtrim((string) @file_get_contents('/proc/self/cmdline'), "\0"));

        if (count($argv) < 3 || end($argv) !== $appPath) {
            return;
        }

        putenv('QPOOL_ZYGOTE_OPCACHE=1'); // once
        @pcntl_exec(PHP_BINARY, array_merge($options, array_slice($argv, 1)));
        Protocol::log('zygote: cannot run PHP again with OPcache on ('.pcntl_strerror(pcntl_get_last_error())
            .'); going on without it');
    }

    /** The -d options that turn on OPcache and (with $jit) its tracing JIT where PHP's settings leave them off. */
    private static function opcacheOptions(bool $jit): array
    {
        $options = ini_get('opcache.enable_cli') ? [] : ['-d', 'opcache.enable_cli=1'];

        if (! $jit) {
            return $options;
        }

        $mode = strtolower(trim((string) ini_get('opcache.jit')));

        if (in_array($mode, ['', '0', 'off', 'disable', 'disabled', 'no', 'false'], true)) {
            array_push($options, '-d', 'opcache.jit=tracing');
        }

        if (self::bytes((string) ini_get('opcache.jit_buffer_size')) === 0) {
            array_push($options, '-d', 'opcache.jit_buffer_size='.self::JIT_BUFFER);
        }

        return $options;
    }

    /** QPOOL_ZYGOTE_JIT=1 asked for the JIT: say so once if this PHP does not run it. */
    private static function sayIfNoJit(string $why): void
    {
        $status = function_exists('opcache_get_status') ? @opcache_get_status(false) : false;

        if (! is_array($status)) {
            Protocol::log('zygote: QPOOL_ZYGOTE_JIT=1, but OPcache\'s status cannot be read (opcache.restrict_api?)');
        } elseif (empty($status['jit']['on'])) {
            Protocol::log('zygote: QPOOL_ZYGOTE_JIT=1, but OPcache\'s JIT is off ('.$why.')');
        }
    }

    /** An ini size ("64M", "0", "0x4000000") in bytes. */
    private static function bytes(string $size): int
    {
        if (function_exists('ini_parse_quantity')) { // PHP 8.2+: every form PHP itself takes
            return (int) @ini_parse_quantity($size);
        }

        $size = trim($size);
        $n = (int) $size;
        $unit = strtolower(substr($size, -1));

        return $n * ($unit === 'g' ? 1 << 30 : ($unit === 'm' ? 1 << 20 : ($unit === 'k' ? 1 << 10 : 1)));
    }

    /** What this PHP lacks for preloading, or null. */
    private function requirements(): ?string
    {
        foreach (['socket_recvmsg' => 'sockets', 'pcntl_fork' => 'pcntl', 'posix_setpgid' => 'posix'] as $fn => $ext) {
            if (! function_exists($fn)) {
                return 'no '.$ext.' extension';
            }
        }

        if (getenv('QPOOL_PHP_FFI') === '0' || ! class_exists('FFI')) {
            return 'no FFI';
        }

        try {
            $this->libc = \FFI::cdef('int open(const char *path, int flags); int dup2(int oldfd, int newfd); '
                .'int close(int fd); int fcntl(int fd, int cmd, ...); int madvise(void *addr, size_t length, int advice);');
        } catch (Throwable $e) {
            return 'FFI is disabled: '.$e->getMessage();
        }

        return null;
    }

    private function openSocket(): bool
    {
        $fd = getenv('QPOOL_ZYGOTE_FD');
        $stream = is_string($fd) && ctype_digit($fd) ? @fopen('php://fd/'.$fd, 'r') : false;
        $sock = $stream ? @socket_import_stream($stream) : false;

        if (! $sock) {
            Protocol::log('zygote: no socket on QPOOL_ZYGOTE_FD ('.var_export($fd, true).')');

            return false;
        }

        // php://fd dup()ed it: the original number goes, so a handler holds neither.
        $this->sockId = Protocol::identity(@fstat($stream) ?: null);
        $this->libc->close((int) $fd);
        $this->sockStream = $stream; // the socket shares its descriptor: never closed apart
        $this->sock = $sock;

        // Nothing the boot or a job runs inherits it (dup() made it
        // inheritable), nor is told where it was.
        foreach ($this->socketFds() as $n) {
            $this->libc->fcntl($n, 2 /* F_SETFD */, 1 /* FD_CLOEXEC */);
        }

        putenv('QPOOL_ZYGOTE_FD');
        unset($_ENV['QPOOL_ZYGOTE_FD'], $_SERVER['QPOOL_ZYGOTE_FD']);

        return true;
    }

    /** The descriptor numbers our socket is on. */
    private function socketFds(): array
    {
        return array_values(array_filter(Protocol::descriptors(), function ($fd) {
            return $fd > 2 && Protocol::identity(Protocol::statFd($fd)) === $this->sockId;
        }));
    }

    /**
     * Close every database, Redis and cache connection the boot opened
     * (forked children would share their sockets: replies cross, and one
     * child's close ends the others'), then list the sockets still open.
     */
    private function closeConnections(): array
    {
        $app = $this->handler->app();

        try {
            Connections::purge($app);
        } catch (Throwable $e) {
            Protocol::log('zygote: closing the boot\'s connections failed: '.$e->getMessage());
        }

        gc_collect_cycles();

        // A copy of stdout or stderr is no connection of the app's: a
        // write-only log stream, which the zygote's own output already is,
        // and harmless to share. Laravel 10 on PHP 8.4 keeps one open after
        // its boot (fd 3), and under systemd's journal stderr is a Unix
        // socket (a pipe under supervisord): counted as a connection, it
        // turned preload off. A copy of stdin still counts (a fork gets
        // /dev/null there: a kept copy would let a job read the
        // supervisor's pipe).
        $ours = [$this->sockId];

        foreach ([1, 2] as $fd) {
            if (($id = Protocol::identity(Protocol::statFd($fd))) !== null) {
                $ours[] = $id;
            }
        }

        return Connections::openSockets($ours);
    }

    private function loop(): int
    {
        pcntl_async_signals(true);
        $stop = function () {
            $this->quit = true;
        };

        foreach ([SIGTERM, SIGINT, SIGQUIT, SIGHUP] as $sig) {
            pcntl_signal($sig, $stop);
        }

        pcntl_signal(SIGCHLD, SIG_IGN); // the kernel reaps our handlers

        $parent = posix_getppid();
        $this->nextCheck = microtime(true) + 1;

        while (! $this->quit) {
            // once a second, busy or not (a stream of fork requests must not hide a deploy)
            if (($status = $this->lookAround($parent)) !== null) {
                return $status;
            }

            $read = [$this->sock];
            $write = $except = null;
            $ready = @socket_select($read, $write, $except, 1);

            if ($ready === false) {
                $errno = socket_last_error($this->sock);

                if (! $this->quit && $errno !== 0 && $errno !== SOCKET_EINTR) {
                    Protocol::log('zygote: its socket failed: '.socket_strerror($errno));

                    return 1;
                }

                socket_clear_error($this->sock);

                continue;
            }

            if ($this->quit || $ready === 0) {
                continue;
            }

            $this->request();
        }

        return 0;
    }

    /** Once a second: the exit status when qpool has gone or the app moved, else null. */
    private function lookAround(int $parent): ?int
    {
        $now = microtime(true);

        if ($now < $this->nextCheck) {
            return null;
        }

        $this->nextCheck = $now + 1;

        if (posix_getppid() !== $parent) {
            return 0; // qpool has gone
        }

        return $this->moved() ? self::EX_APP_MOVED : null;
    }

    /** The configured app path resolves elsewhere than the booted code (a symlinked release swapped). */
    private function moved(): bool
    {
        clearstatcache(true);
        $now = realpath($this->appPath);

        if ($now === false || $now === $this->base) {
            return false;
        }

        Protocol::log(sprintf('zygote: %s now points to %s (booted from %s): exiting so that qpool boots the new code',
            $this->appPath, $now, $this->base));

        return true;
    }

    /** One datagram: "fork 1 WORKERPID" with the worker's four descriptors. */
    private function request(): void
    {
        $msg = ['name' => [], 'buffer_size' => 256,
            'controllen' => socket_cmsg_space(SOL_SOCKET, SCM_RIGHTS, self::FD_COUNT + 4)];

        if (@socket_recvmsg($this->sock, $msg, MSG_DONTWAIT) === false) {
            return;
        }

        $fds = [];

        foreach ($msg['control'] ?? [] as $c) {
            if (($c['level'] ?? null) === SOL_SOCKET && ($c['type'] ?? null) === SCM_RIGHTS) {
                $fds = array_merge($fds, $c['data']);
            }
        }

        $text = (string) ($msg['iov'][0] ?? '');

        if (preg_match('/^agent 1 (\d+)\n?$/', $text)) {
            $this->forkAgent($fds);

            return;
        }

        $streams = count($fds) === self::FD_COUNT ? self::asStreams($fds) : null;

        if ($streams === null || ! preg_match('/^fork 1 (\d+)\n?$/', $text)
            || ! self::isPipe($streams[2]) || ! self::isPipe($streams[3])) {
            Protocol::log('zygote: ignoring a malformed request ('.count($fds).' descriptors)');
            self::closeAll($fds);

            return;
        }

        $fds = $streams;

        if (! self::workerWaits($fds[2])) {
            self::closeAll($fds); // the worker gave up on it (start_timeout) or has gone

            return;
        }

        $pid = pcntl_fork();

        if ($pid === 0) {
            exit($this->child($fds));
        }

        if ($pid < 0) {
            Protocol::log('zygote: fork failed: '.pcntl_strerror(pcntl_get_last_error()));
        }

        // Closed here at once: no later sibling inherits them, and the
        // worker sees EOF as soon as its handler is gone.
        self::closeAll($fds);
    }

    /**
     * The master asks for the pool's app agent (src/master/agent.h): one
     * stream socket, on which the forked agent answers (Agent.php). It
     * stays in the zygote's process group, dies with the zygote (the
     * parent-death signal) and sees nothing of the zygote's socket.
     */
    private function forkAgent(array $fds): void
    {
        $streams = count($fds) === 1 ? self::asStreams($fds) : null;

        if ($streams === null || ! self::isSocket($streams[0])) {
            Protocol::log('zygote: ignoring a malformed agent request ('.count($fds).' descriptors)');
            self::closeAll($fds);

            return;
        }

        $zygote = getmypid(); // the agent's parent, taken before the fork: it may die before the agent looks
        $pid = pcntl_fork();

        if ($pid === 0) {
            exit($this->agentChild($streams[0], $zygote));
        }

        if ($pid < 0) {
            Protocol::log('zygote: fork failed: '.pcntl_strerror(pcntl_get_last_error()));
        }

        self::closeAll($streams);
    }

    private function agentChild($io, int $zygote): int
    {
        foreach ([SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGCHLD, SIGALRM] as $sig) {
            pcntl_signal($sig, SIG_DFL);
        }

        pcntl_sigprocmask(SIG_SETMASK, []);

        try {
            \FFI::cdef('int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5);')
                ->prctl(1 /* PR_SET_PDEATHSIG */, 9 /* SIGKILL */, 0, 0, 0);
        } catch (Throwable $e) {
            // it still exits when it sees its zygote gone, once a second
        }

        while (ob_get_level() > 0) {
            ob_end_flush();
        }

        $null = $this->libc->open('/dev/null', 0);

        if ($null < 0 || ! $this->dropSocket($null) || $this->libc->dup2($null, 0) !== 0) {
            Protocol::log('agent: cannot set up its descriptors');

            return 71;
        }

        $this->libc->close($null);
        ob_start(new StdoutToStderr(), 1);

        return (new Agent($this->handler->app(), $io, $zygote))->run();
    }

    private static function isSocket($stream): bool
    {
        $st = @fstat($stream);

        return is_array($st) && ($st['mode'] & 0170000) === 0140000;
    }

    /**
     * The received descriptors as streams, or null when one is neither a
     * stream nor a socket. A socket (the worker's stderr under systemd's
     * journal) comes as a \Socket: exported, it shares its descriptor.
     */
    private static function asStreams(array $fds): ?array
    {
        $out = [];

        foreach ($fds as $f) {
            if ($f instanceof \Socket) {
                $f = @socket_export_stream($f);
            }

            if (! is_resource($f)) {
                return null;
            }

            $out[] = $f;
        }

        return $out;
    }

    private static function isPipe($stream): bool
    {
        $st = @fstat($stream);

        return is_array($st) && ($st['mode'] & 0170000) === 0010000;
    }

    /** Its request pipe still has a writer (nothing is ever written before ready, so readable = EOF). */
    private static function workerWaits($req): bool
    {
        $read = [$req];
        $write = $except = null;

        return @stream_select($read, $write, $except, 0) === 0;
    }

    /**
     * In the forked handler: its own process group, default signals, fresh
     * random seeds, nothing of the zygote's socket, the worker's stderr and
     * log pipe on fds 2 and 1 and /dev/null on fd 0, its worker's death
     * ending a running job (WorkerLink), then the handler loop.
     */
    private function child(array $fds): int
    {
        posix_setpgid(0, 0);

        foreach ([SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGCHLD] as $sig) {
            pcntl_signal($sig, SIG_DFL);
        }

        pcntl_sigprocmask(SIG_SETMASK, []);
        mt_srand(); // else every handler draws the zygote's mt_rand / rand / shuffle / array_rand sequence

        [$err, $log, $req, $resp] = $fds;

        while (ob_get_level() > 0) {
            ob_end_flush();
        }

        $null = $this->libc->open('/dev/null', 0);
        $errFd = self::fdOf($err);
        $logFd = self::fdOf($log);

        if ($null < 0 || $errFd === null || $logFd === null || ! $this->dropSocket($null)
            || $this->libc->dup2($null, 0) !== 0 || $this->libc->dup2($logFd, 1) !== 1
            || $this->libc->dup2($errFd, 2) !== 2) {
            Protocol::log('forked handler: cannot set up its descriptors');

            return 71;
        }

        $this->libc->close($null);
        fclose($err);
        fclose($log);

        putenv('QPOOL_PROTOCOL=2');
        $reqFd = self::fdOf($req);
        $this->handler->linkToWorker($reqFd !== null ? WorkerLink::open($reqFd) : null);

        return $this->handler->serve(new Protocol([$req, $resp]), sprintf('forked by zygote %d', posix_getppid()), true);
    }

    /**
     * The zygote's socket becomes /dev/null in a handler: it can take no
     * sibling's request, and the number stays taken (PHP still holds it
     * and closes it at exit: it must not be a job's file by then).
     */
    private function dropSocket(int $null): bool
    {
        foreach ($this->socketFds() as $fd) {
            if ($this->libc->dup2($null, $fd) !== $fd) {
                return false;
            }
        }

        return true;
    }

    /** The descriptor number a stream holds (matched by device and inode; works without /proc too). */
    private static function fdOf($stream): ?int
    {
        $want = Protocol::identity(@fstat($stream) ?: null);

        if ($want === null) {
            return null;
        }

        $found = null;

        foreach (Protocol::descriptors() as $fd) {
            if (Protocol::identity(Protocol::statFd($fd)) === $want) {
                $found = $fd; // the last: received descriptors are the newest
            }
        }

        return $found;
    }

    private static function closeAll(array $fds): void
    {
        foreach ($fds as $f) {
            if (is_resource($f)) {
                fclose($f);
            } elseif ($f instanceof \Socket) {
                socket_close($f);
            }
        }
    }
}
