<?php

// The client sends Connection: close and reads answers by their framing, so a server that keeps
// the connection open after answering (as wrangler dev does) never makes it wait for EOF.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Tests\Support\FakeServer;
use Delayq\Tests\Support\ServiceTestCase;

final class ConnectionTest extends ServiceTestCase
{
    public function testAnAnswerWithContentLengthOnAConnectionLeftOpenReturnsAtOnce(): void
    {
        $server = new FakeServer(['hold', 'hold', 'hold'], self::serviceUrl());
        // a generous time limit: were the client waiting for EOF, this test would take 3 × 20 s
        $dq = self::client($server->url, retries: 0, timeoutMs: 20000);
        $topic = self::topic();
        $started = microtime(true);
        self::assertTrue($dq->add(['topic' => $topic, 'id' => self::uid('kept-open')])['created']);
        self::assertSame(self::uid('kept-open'), $dq->get(self::uid('kept-open'))['id']);
        self::assertSame('ok', $dq->health()['status']);
        self::assertLessThan(3.0, microtime(true) - $started);
        foreach ($server->requests() as $request) {
            self::assertSame('close', $request['headers']['connection'] ?? null);
            self::assertArrayNotHasKey('expect', $request['headers']);
        }
        self::assertCount(3, $server->requests());
    }

    public function testAChunkedAnswerOnAConnectionLeftOpenReturnsAtOnce(): void
    {
        $server = new FakeServer(['hold-chunked', 'hold-chunked'], self::serviceUrl());
        $dq = self::client($server->url, retries: 0, timeoutMs: 20000);
        $topic = self::topic();
        $started = microtime(true);
        $dq->add(['topic' => $topic, 'id' => self::uid('chunked'), 'body' => str_repeat('abc', 100)]);
        self::assertSame(str_repeat('abc', 100), $dq->get(self::uid('chunked'))['body']);
        self::assertLessThan(3.0, microtime(true) - $started);
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
