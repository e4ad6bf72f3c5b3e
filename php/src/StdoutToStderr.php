<?php

namespace Qpool\Laravel;

/**
 * Output-buffer handler that moves everything a job prints (echo, print,
 * var_dump, printf, ...) to stderr, so it never reaches the protocol
 * stream. Installed with ob_start($handler, 1): flushed after every write.
 */
final class StdoutToStderr
{
    public function __invoke($buffer, $phase = 0)
    {
        if ($buffer !== '') {
            @fwrite(STDERR, $buffer);
        }

        return '';
    }
}
