<?php

// Merged over the framework's own config/app.php (11+): only what differs.
return [

    'name' => env('APP_NAME', 'Laravel'),

    'env' => env('APP_ENV', 'testing'),

    'debug' => (bool) env('APP_DEBUG', true),

    'timezone' => 'UTC',

    // Fixed key so encryption (ShouldBeEncrypted jobs) works without a .env.
    'key' => env('APP_KEY', 'base64:BhXhct9h2jXT8ZqjAYh3MgoV62UgwWmeQnJ9Tli+JaA='),

    'cipher' => 'AES-256-CBC',

];
