<?php

// Changing a waiting job (reschedule, promote) and failure reasons (release's and bury's error),
// through the client, against the running service.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\DelayqException;
use Delayq\Tests\Support\ServiceTestCase;

final class RescheduleTest extends ServiceTestCase
{
    public function testRescheduleMovesADelayedJobAndPromoteMakesItReady(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $id = self::uid('moved');
        $dq->add(['topic' => $topic, 'id' => $id, 'delay' => 60, 'body' => ['n' => 1]]);
        $later = $dq->reschedule($id, delay: 3600);
        self::assertSame('delayed', $later['state']);
        self::assertEqualsWithDelta(microtime(true) * 1000 + 3_600_000, $later['dueAt'], 60_000);
        $runAt = (int) (microtime(true) * 1000) + 7_200_000;
        self::assertSame($runAt, $dq->reschedule($id, runAt: $runAt)['dueAt']);
        self::assertSame([], $dq->pop($topic));
        $promoted = $dq->promote($id);
        self::assertSame('ready', $promoted['state']);
        self::assertSame(['n' => 1], $promoted['body']);
        try {
            $dq->promote($id);
            self::fail('a ready job was promoted');
        } catch (DelayqException $e) {
            self::assertSame(['invalid_state', 409], [$e->errorCode, $e->status]);
        }
        try {
            $dq->reschedule($id, runAt: (int) microtime(true) + 60);
            self::fail('a runAt in seconds was taken');
        } catch (DelayqException $e) {
            self::assertSame(['invalid_request', 400], [$e->errorCode, $e->status]);
            self::assertStringContainsString('runAt', $e->getMessage());
        }
    }

    public function testReleaseAndBuryKeepTheirErrorAsLastError(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $id = self::uid('failing');
        $dq->add(['topic' => $topic, 'id' => $id, 'maxAttempts' => 3]);
        $dq->pop($topic);
        $released = $dq->release($id, error: "bank timed out\nretrying");
        self::assertSame("bank timed out\nretrying", $released['lastError']['message'] ?? null);
        self::assertSame(1, $released['lastError']['attempt'] ?? null);
        $job = $dq->pop($topic)[0];
        $buried = $dq->bury($id, $job['receipt'] ?? null, 'card stolen');
        self::assertSame('dead', $buried['state']);
        self::assertSame(['card stolen', 2], [$buried['lastError']['message'] ?? null, $buried['lastError']['attempt'] ?? null]);
    }

    public function testTheWorkerReleasesWithTheHandlersMessage(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $id = self::uid('worker');
        $dq->add(['topic' => $topic, 'id' => $id, 'maxAttempts' => 1]);
        $ran = false;
        $dq->work($topic, function () use (&$ran): void {
            $ran = true;
            throw new \RuntimeException(str_repeat('é', 600));
        }, wait: 1, shouldStop: function () use (&$ran): bool {
            return $ran; // by reference: an arrow function would keep the value it was made with
        });
        $job = $dq->get($id);
        self::assertSame('dead', $job['state']);
        $message = $job['lastError']['message'] ?? '';
        self::assertLessThanOrEqual(1024, strlen($message));
        self::assertStringEndsWith('é…', $message);
    }
}
