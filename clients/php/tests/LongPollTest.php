<?php

// pop with wait: a job added by another process while the request waits is handed out at once.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Tests\Support\ServiceTestCase;

final class LongPollTest extends ServiceTestCase
{
    public function testAWaitingPopSeesAJobAnotherProcessAddsASecondLater(): void
    {
        $topic = self::topic();
        $id = self::uid('late');
        $adder = proc_open(
            [PHP_BINARY, __DIR__ . '/Support/add-later.php', self::serviceUrl(), self::env('DELAYQ_TOKEN'), $topic, $id, '1'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
        );
        self::assertIsResource($adder);
        $started = microtime(true);
        $jobs = self::client()->pop($topic, wait: 10);
        $elapsed = microtime(true) - $started;
        $output = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
        self::assertSame(0, proc_close($adder), "add-later.php failed: {$output}");
        self::assertCount(1, $jobs);
        self::assertSame($id, $jobs[0]['id']);
        self::assertSame('reserved', $jobs[0]['state']);
        // it waited for the add (~1 s), and did not sit out the whole 10 s
        self::assertGreaterThan(0.8, $elapsed);
        self::assertLessThan(5, $elapsed);
    }

    public function testAWaitWithNothingComingEndsEmptyAfterTheWait(): void
    {
        $started = microtime(true);
        // the client's time limit (1 s here) gets the wait on top, so a 2 s wait is no timeout
        $jobs = self::client(timeoutMs: 1000)->pop(self::topic(), wait: 2);
        $elapsed = microtime(true) - $started;
        self::assertSame([], $jobs);
        self::assertGreaterThan(1.8, $elapsed);
        self::assertLessThan(5, $elapsed);
    }

    public function testADelayedJobIsHandedOutWhenDueNotBefore(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $job = $dq->add(['topic' => $topic, 'id' => self::uid('due'), 'delay' => 1])['job'];
        self::assertSame([], $dq->pop($topic));
        $jobs = $dq->pop($topic, wait: 3);
        $now = (int) floor(microtime(true) * 1000);
        self::assertSame(self::uid('due'), $jobs[0]['id'] ?? null);
        self::assertGreaterThanOrEqual($job['dueAt'], $now);
    }
}
