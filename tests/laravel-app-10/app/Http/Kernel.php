<?php

namespace App\Http;

use Illuminate\Foundation\Http\Kernel as HttpKernel;

/** The 10.x skeleton's HTTP kernel, without middleware (no web server in the tests). */
class Kernel extends HttpKernel
{
    protected $middleware = [];

    protected $middlewareGroups = [
        'web' => [],
        'api' => [],
    ];

    protected $middlewareAliases = [];
}
