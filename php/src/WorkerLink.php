<?php

namespace Qpool\Laravel;

/**
 * A forked handler's tie to its worker (Zygote.php). A handler its worker
 * starts dies with it (parent-death signal); a forked one is the zygote's
 * child, so nothing tells it when its worker dies mid-job, and the job would
 * run on past the pool's timeout while retry_after runs it again. What the
 * worker's death does leave is the end of the request pipe, which only the
 * worker writes: while a job (or its failure path) runs, the pipe is set to
 * raise SIGIO (O_ASYNC, owned by this process), and when the pipe has hung
 * up (POLLHUP) the handler kills its own process group, the job's processes
 * with it, as the worker would have. Between jobs the handler reads the
 * pipe, and its EOF ends it already.
 */
final class WorkerLink
{
    private const F_GETFL = 3;
    private const F_SETFL = 4;
    private const F_SETOWN = 8;
    private const O_ASYNC = 020000;
    private const POLLIN = 0x1;
    private const POLLHUP = 0x10;

    /** @var \FFI */
    private $libc;

    /** @var int the request pipe */
    private $fd;

    /** @var int|null its flags while disarmed; null: not armed */
    private $flags;

    /** @var \FFI\CData struct pollfd */
    private $poll;

    /** The request pipe's descriptor; null when it cannot be watched (logged). */
    public static function open(int $fd): ?self
    {
        try {
            $libc = \FFI::cdef('struct pollfd { int fd; short events; short revents; }; '
                .'int poll(struct pollfd *fds, unsigned long nfds, int timeout); int fcntl(int fd, int cmd, ...);');
        } catch (\Throwable $e) {
            Protocol::log('forked handler: cannot watch its worker: '.$e->getMessage());

            return null;
        }

        return new self($libc, $fd);
    }

    private function __construct(\FFI $libc, int $fd)
    {
        $this->libc = $libc;
        $this->fd = $fd;
        $this->poll = $libc->new('struct pollfd');
        // Not restarted (SA_RESTART off): a job blocked in a call the kernel
        // would restart (flock, a database socket's read) gets EINTR, so PHP
        // gets control back and runs check() when the worker has gone.
        pcntl_signal(SIGIO, function () {
            $this->check();
        }, false);
        $libc->fcntl($fd, self::F_SETOWN, getmypid());
    }

    /** A job starts: its worker's death now ends it. */
    public function arm(): void
    {
        $flags = $this->libc->fcntl($this->fd, self::F_GETFL);

        if ($flags < 0 || $this->libc->fcntl($this->fd, self::F_SETFL, $flags | self::O_ASYNC) < 0) {
            return;
        }

        $this->flags = $flags;
        $this->check(); // gone already, before the signal could be asked for
    }

    public function disarm(): void
    {
        if ($this->flags !== null) {
            $this->libc->fcntl($this->fd, self::F_SETFL, $this->flags);
            $this->flags = null;
        }
    }

    private function check(): void
    {
        $this->poll->fd = $this->fd;
        $this->poll->events = self::POLLIN;
        $this->poll->revents = 0;

        if ($this->libc->poll(\FFI::addr($this->poll), 1, 0) > 0 && ($this->poll->revents & self::POLLHUP)) {
            Protocol::log('its worker has gone (its request pipe hung up) while a job ran: '
                .'killing the job and its process group');
            posix_kill(0, SIGKILL);
        }
    }
}
