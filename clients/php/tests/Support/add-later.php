<?php

// Adds one job after a pause, from its own process: the other side of the long-poll test.
//   php add-later.php <url> <token> <topic> <id> <seconds>

declare(strict_types=1);

require __DIR__ . '/../../autoload.php';

[, $url, $token, $topic, $id, $seconds] = $argv;
usleep((int) ((float) $seconds * 1_000_000));
$result = (new Delayq\Client($url, $token))->add(['topic' => $topic, 'id' => $id, 'body' => 'late']);
exit($result['created'] ? 0 : 1);
