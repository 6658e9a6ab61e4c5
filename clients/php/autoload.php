<?php

// The PSR-4 autoloader for Delayq\ without Composer: `require 'clients/php/autoload.php';`.

declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    $prefix = 'Delayq\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
