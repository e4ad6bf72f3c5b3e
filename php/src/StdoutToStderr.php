<?php

namespace Qpool\Laravel;

/**
 * Output-buffer handler that moves everything a job prints (echo, print,
 * var_dump, printf, ...) to stderr, so it never reaches the protocol
 * stream. Installed with ob_start($handler, 1): flushed after every write.
 */
final class StdoutToStderr
{
    /** @var bool the last forwarded byte was not a newline */
    private static $openLine = false;

    public function __invoke($buffer, $phase = 0)
    {
        if ($buffer !== '') {
            @fwrite(STDERR, $buffer);
            self::$openLine = substr($buffer, -1) !== "\n";
        }

        return '';
    }

    /**
     * End a line a job left unterminated, so the next log line starts clean.
     */
    public static function endLine(): void
    {
        if (self::$openLine) {
            @fwrite(STDERR, "\n");
            self::$openLine = false;
        }
    }
}
