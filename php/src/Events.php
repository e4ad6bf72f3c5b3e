<?php

namespace Qpool\Laravel;

use ReflectionMethod;
use Throwable;

/**
 * Raises the queue events (Illuminate\Queue\Events\*) that the running
 * Laravel version has, with the constructor arguments that version takes:
 * each class is looked up by name and its constructor's parameters filled
 * by name (connectionName, job, queue, exception, ...), others left at their
 * defaults. A class this version lacks is skipped. No version strings.
 */
final class Events
{
    const NS = 'Illuminate\\Queue\\Events\\';

    /** @var \Illuminate\Contracts\Events\Dispatcher */
    private $events;

    /** @var callable reports a listener's exception */
    private $report;

    /** @var array<string, array|null> constructor parameters by class (null: no such class) */
    private $params = [];

    /** @var array<string, array> per class: [name, has default, default] of each constructor parameter */
    private $spec = [];

    /** @var array<string, string[]> interfaces of each event class */
    private $interfaces = [];

    /** @var bool the framework's own dispatcher: an event nobody listens to can be left unmade */
    private $plain;

    public function __construct($events, callable $report)
    {
        $this->events = $events;
        $this->report = $report;
        $this->plain = get_class($events) === 'Illuminate\Events\Dispatcher' && method_exists($events, 'hasListeners');
    }

    public function has(string $name): bool
    {
        return $this->parameters($name) !== null;
    }

    /** The event's constructor parameter names, in order. */
    public function parameterNames(string $name): array
    {
        return array_map(function ($p) {
            return $p->getName();
        }, $this->parameters($name) ?? []);
    }

    /** Dispatch the event if this version has it; a listener's exception is reported, not thrown. */
    public function raise(string $name, array $args): void
    {
        $this->send($name, $args, false);
    }

    /** As raise(), through Dispatcher::until() (the Worker does so for Looping). */
    public function until(string $name, array $args): void
    {
        $this->send($name, $args, true);
    }

    /** Build the event (null if this version has no such class). */
    public function make(string $name, array $args)
    {
        if (! isset($this->spec[$name])) {
            $params = $this->parameters($name);

            if ($params === null) {
                return null;
            }

            $this->spec[$name] = array_map(function ($p) {
                $default = $p->isDefaultValueAvailable();

                return [$p->getName(), $default, $default ? $p->getDefaultValue() : null];
            }, $params);
        }

        $values = [];

        foreach ($this->spec[$name] as [$param, $hasDefault, $default]) {
            $values[] = array_key_exists($param, $args) ? $args[$param] : $default;
        }

        $class = self::NS.$name;

        return new $class(...$values);
    }

    private function send(string $name, array $args, bool $until): void
    {
        // Dispatching an event no listener (wildcards included) hears does
        // nothing on the framework's dispatcher: it is not even made. A
        // decorated or faked dispatcher gets every event, as the Worker sends it.
        if ($this->plain && ! $this->heard($name)) {
            return;
        }

        try {
            $event = $this->make($name, $args);

            if ($event === null) {
                return;
            }

            $until ? $this->events->until($event) : $this->events->dispatch($event);
        } catch (Throwable $e) {
            ($this->report)($e);
        }
    }

    /** Does a listener hear the event: of its class, a wildcard, or one of its interfaces (getListeners()). */
    private function heard(string $name): bool
    {
        $class = self::NS.$name;

        if ($this->events->hasListeners($class)) {
            return true;
        }

        if (! isset($this->interfaces[$name])) {
            $this->interfaces[$name] = class_exists($class) ? array_values(class_implements($class)) : [];
        }

        foreach ($this->interfaces[$name] as $interface) {
            if ($this->events->hasListeners($interface)) {
                return true;
            }
        }

        return false;
    }

    private function parameters(string $name): ?array
    {
        if (! array_key_exists($name, $this->params)) {
            $class = self::NS.$name;
            $this->params[$name] = class_exists($class)
                ? (method_exists($class, '__construct') ? (new ReflectionMethod($class, '__construct'))->getParameters() : [])
                : null;
        }

        return $this->params[$name];
    }
}
