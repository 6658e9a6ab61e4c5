<?php

// One process of bench/php-client.ts: DELAYQ_CALLS adds through the PHP client, one at a time,
// after a short warm-up; prints {"wallMs":…, "cpuMs":…} per call as JSON.
//   DELAYQ_URL=… DELAYQ_TOKEN=… DELAYQ_KEEP_ALIVE=1|0 DELAYQ_CALLS=2000 php bench/php/calls.php

declare(strict_types=1);

require __DIR__ . '/../../clients/php/autoload.php';

$calls = (int) (getenv('DELAYQ_CALLS') ?: 2000);
$dq = new Delayq\Client(
    (string) getenv('DELAYQ_URL'),
    (string) getenv('DELAYQ_TOKEN'),
    keepAlive: getenv('DELAYQ_KEEP_ALIVE') !== '0',
);
$topic = 'php-bench-' . bin2hex(random_bytes(4));

/** This process's CPU time so far, ms. */
function cpuMs(): float
{
    $usage = getrusage();
    return ($usage['ru_utime.tv_sec'] + $usage['ru_stime.tv_sec']) * 1e3
        + ($usage['ru_utime.tv_usec'] + $usage['ru_stime.tv_usec']) / 1e3;
}

for ($i = 0; $i < 100; $i++) {
    $dq->add(['topic' => $topic, 'delay' => 3600, 'body' => ['order' => $i]]);
}
$started = hrtime(true);
$cpu = cpuMs();
for ($i = 0; $i < $calls; $i++) {
    $dq->add(['topic' => $topic, 'delay' => 3600, 'body' => ['order' => $i]]);
}
echo json_encode([
    'wallMs' => (hrtime(true) - $started) / 1e6 / $calls,
    'cpuMs' => (cpuMs() - $cpu) / $calls,
]), "\n";
