<?php

namespace Qpool\Laravel;

/**
 * Laravel's CallQueuedHandler, which also hands the command it unserializes
 * to Tags (no second unserialize, no second query for its models). Loaded
 * only when Tags::install() found getCommand() as Laravel 8 to 13 declare it.
 */
class TaggingCallQueuedHandler extends \Illuminate\Queue\CallQueuedHandler
{
    protected function getCommand(array $data)
    {
        return Tags::$command = parent::getCommand($data);
    }
}
