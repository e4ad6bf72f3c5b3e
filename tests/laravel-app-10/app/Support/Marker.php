<?php

namespace App\Support;

use Illuminate\Support\Env;

/**
 * Appends one JSON object per line to the file named by MARKER_FILE.
 * Nothing is written when MARKER_FILE is unset or empty.
 */
class Marker
{
    public static function path(): ?string
    {
        $path = Env::get('MARKER_FILE');

        return is_string($path) && $path !== '' ? $path : null;
    }

    public static function write(array $record): void
    {
        if (($path = static::path()) === null) {
            return;
        }

        $line = json_encode($record, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PARTIAL_OUTPUT_ON_ERROR);

        file_put_contents($path, $line."\n", FILE_APPEND | LOCK_EX);
    }
}
