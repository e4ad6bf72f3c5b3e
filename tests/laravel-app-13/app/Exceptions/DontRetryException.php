<?php

namespace App\Exceptions;

/** Listed in bootstrap/app.php's withExceptions(dontRetry): 13.x fails the job at once. */
class DontRetryException extends \RuntimeException
{
}
