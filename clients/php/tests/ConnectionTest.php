<?php

// The client keeps its connection open between calls and reuses it, replaces one the server
// closed, and reads answers by their framing, so a connection left open never makes it wait.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Tests\Support\FakeServer;
use Delayq\Tests\Support\ServiceTestCase;

final class ConnectionTest extends ServiceTestCase
{
    /**
     * The number of the connection each request came on, in order.
     *
     * @return list<int>
     */
    private static function connections(FakeServer $server): array
    {
        return array_map(static fn (array $request): int => $request['connection'], $server->requests());
    }

    public function testCallsReuseOneKeptAliveConnectionAndReturnAtOnce(): void
    {
        $server = new FakeServer(['hold', 'hold', 'hold'], self::serviceUrl());
        // keep-alive is the default; a generous time limit: were the client waiting for EOF, this
        // test would take 3 × 20 s
        $dq = new \Delayq\Client($server->url, self::env('DELAYQ_TOKEN'), retries: 0, timeoutMs: 20000);
        $topic = self::topic();
        $started = microtime(true);
        self::assertTrue($dq->add(['topic' => $topic, 'id' => self::uid('kept-open')])['created']);
        self::assertSame(self::uid('kept-open'), $dq->get(self::uid('kept-open'))['id']);
        self::assertSame('ok', $dq->health()['status']);
        self::assertLessThan(3.0, microtime(true) - $started);
        self::assertSame([1, 1, 1], self::connections($server));
        foreach ($server->requests() as $request) {
            self::assertArrayNotHasKey('connection', $request['headers']);
            self::assertArrayNotHasKey('expect', $request['headers']);
        }
    }

    public function testAChunkedAnswerOnAKeptConnectionReturnsAtOnce(): void
    {
        $server = new FakeServer(['hold-chunked', 'hold-chunked'], self::serviceUrl());
        $dq = self::client($server->url, retries: 0, timeoutMs: 20000);
        $topic = self::topic();
        $started = microtime(true);
        $dq->add(['topic' => $topic, 'id' => self::uid('chunked'), 'body' => str_repeat('abc', 100)]);
        self::assertSame(str_repeat('abc', 100), $dq->get(self::uid('chunked'))['body']);
        self::assertLessThan(3.0, microtime(true) - $started);
        self::assertSame([1, 1], self::connections($server));
    }

    public function testAConnectionTheServerClosedWhileIdleIsReplacedWithoutARetry(): void
    {
        $server = new FakeServer(['hangup', 'hold'], self::serviceUrl());
        $dq = self::client($server->url, retries: 0);
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('hangup')]);
        usleep(200_000); // the server has closed the connection it called kept-alive
        // retries: 0, yet the call goes through, on a new connection, sent once
        self::assertSame(1, $dq->topic($topic)['counts']['ready']);
        self::assertSame([1, 2], self::connections($server));
        self::assertSame(['POST', 'GET'], array_column($server->requests(), 'method'));
    }

    public function testAConnectionThatFailedIsNotReused(): void
    {
        $server = new FakeServer(['stall', 'hold', 'hold'], self::serviceUrl());
        $dq = self::client($server->url, retries: 1, retryDelayMs: 1, timeoutMs: 500);
        self::assertSame('ok', $dq->health()['status']);
        self::assertSame('ok', $dq->health()['status']);
        // the stalled connection (1) was dropped; the retry's connection (2) is kept
        self::assertSame([1, 2, 2], self::connections($server));
    }

    public function testCloseEndsTheKeptConnectionAndTheClientStaysUsable(): void
    {
        $server = new FakeServer(['hold', 'hold'], self::serviceUrl());
        $dq = self::client($server->url, retries: 0);
        $dq->health();
        $dq->close();
        $dq->close(); // twice is harmless
        self::assertSame('ok', $dq->health()['status']);
        self::assertSame([1, 2], self::connections($server));
    }

    public function testWithoutKeepAliveEveryCallConnectsAnewAndAsksToClose(): void
    {
        // the server would keep each connection open; the client does not reuse them
        $server = new FakeServer(['hold', 'hold'], self::serviceUrl());
        $dq = self::client($server->url, retries: 0, keepAlive: false);
        $dq->health();
        $dq->health();
        self::assertSame([1, 2], self::connections($server));
        foreach ($server->requests() as $request) {
            self::assertSame('close', $request['headers']['connection'] ?? null);
        }
    }

    public function testTheRequestCarriesTheTokenAndJsonHeaders(): void
    {
        $server = new FakeServer([], self::serviceUrl());
        $dq = self::client($server->url);
        $dq->pop(self::topic());
        $dq->health();
        [$pop, $health] = $server->requests();
        self::assertSame('POST', $pop['method']);
        self::assertSame('Bearer ' . self::env('DELAYQ_TOKEN'), $pop['headers']['authorization']);
        self::assertSame('application/json', $pop['headers']['content-type']);
        self::assertSame('application/json', $pop['headers']['accept']);
        // an empty options object is sent as {}, not []
        self::assertSame('{}', $pop['body']);
        self::assertArrayNotHasKey('authorization', $health['headers'], 'health sends no token');
    }
}
