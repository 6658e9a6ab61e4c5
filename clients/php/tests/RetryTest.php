<?php

// Retries like the TS client: 503s (honouring Retry-After), network errors and timeouts are tried
// again with backoff; other statuses are final. A scripted server stands in front of the service.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Tests\Support\FakeServer;
use Delayq\Tests\Support\ServiceTestCase;

final class RetryTest extends ServiceTestCase
{
    private const UUID = '/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/';

    public function testA503IsRetriedAfterRetryAfterThenSucceeds(): void
    {
        $server = new FakeServer(['503:1', 'forward'], self::serviceUrl());
        $topic = self::topic();
        $started = microtime(true);
        $result = self::client($server->url, retries: 3, retryDelayMs: 10)->add(['topic' => $topic, 'body' => 'x']);
        $elapsed = microtime(true) - $started;
        self::assertTrue($result['created']);
        // Retry-After: 1 is honoured although the client's own backoff would wait ~10 ms
        self::assertGreaterThanOrEqual(1.0, $elapsed);
        self::assertLessThan(3.0, $elapsed);
        $requests = $server->requests();
        self::assertCount(2, $requests);
        // the id was made once, before the first attempt: both attempts carry it
        $ids = array_map(static fn (array $r): string => json_decode($r['body'], true)['id'], $requests);
        self::assertMatchesRegularExpression(self::UUID, $ids[0]);
        self::assertSame([$result['job']['id'], $result['job']['id']], $ids);
        self::assertSame(1, self::client()->topic($topic)['counts']['ready']);
    }

    public function testAnIdLessAddWhoseAnswerWasLostIsRetriedIntoOneJob(): void
    {
        // The first attempt reaches the service, but the connection drops before the answer.
        $server = new FakeServer(['drop-after', 'forward'], self::serviceUrl());
        $topic = self::topic();
        $result = self::client($server->url, retries: 2)->add(['topic' => $topic, 'body' => 'once']);
        self::assertFalse($result['created'], 'the retry found the job the lost attempt added');
        self::assertSame('once', $result['job']['body']);
        self::assertSame(['drop-after', 'forward'], array_column($server->requests(), 'action'));
        self::assertSame(1, self::client()->topic($topic)['counts']['ready']);
        self::assertCount(1, self::client()->listJobs($topic, 'ready')['jobs']);
    }

    public function testABatchAndACommandAddKeepTheirIdsAcrossRetries(): void
    {
        $server = new FakeServer(['drop-after', 'forward', 'drop-after', 'forward'], self::serviceUrl());
        $dq = self::client($server->url, retries: 1);
        $topic = self::topic();
        $results = $dq->addBatch([['topic' => $topic, 'body' => 1], ['topic' => $topic, 'body' => 2]]);
        self::assertSame([false, false], array_column($results, 'created'));
        $command = $dq->command(['command' => 'add', 'topic' => $topic, 'body' => 3]);
        self::assertTrue($command['success']);
        self::assertMatchesRegularExpression(self::UUID, $command['id']);
        self::assertSame(3, self::client()->topic($topic)['counts']['ready']);
    }

    public function testNetworkErrorsAreRetriedThenReportedAsNetworkError(): void
    {
        $server = new FakeServer(['drop', 'drop', 'drop', 'drop'], self::serviceUrl());
        $started = microtime(true);
        $error = $this->assertDelayqError('network_error', 0, fn () => self::client($server->url, retries: 2, retryDelayMs: 50)->get('x'));
        self::assertCount(3, $server->requests(), 'one attempt and two retries');
        self::assertStringContainsString('GET /v1/jobs/x', $error->getMessage());
        // backoff between attempts: at least half of 50 ms, then of 100 ms
        self::assertGreaterThan(0.07, microtime(true) - $started);
        // nobody listening at all is a network error too
        $this->assertDelayqError('network_error', 0, fn () => self::client('http://127.0.0.1:1', retries: 1)->health());
    }

    public function testANetworkErrorThenSuccessIsInvisibleToTheCaller(): void
    {
        $server = new FakeServer(['drop', 'forward'], self::serviceUrl());
        self::assertSame('ok', self::client($server->url)->health()['status']);
        self::assertCount(2, $server->requests());
    }

    public function testClientErrorsAreNeverRetried(): void
    {
        $server = new FakeServer([], self::serviceUrl());
        $dq = self::client($server->url, retries: 3);
        $this->assertDelayqError('job_not_found', 404, fn () => $dq->get(self::uid('absent')));
        $this->assertDelayqError('invalid_request', 400, fn () => $dq->add(['topic' => self::topic(), 'dealy' => 1]));
        $this->assertDelayqError('unauthorized', 401, fn () => (new \Delayq\Client($server->url, 'nope', retries: 3))->topics());
        self::assertCount(3, $server->requests());
    }

    public function testRetriesRunOutOnA503AndItIsReported(): void
    {
        $server = new FakeServer(['503:0', '503:0', '503:0'], self::serviceUrl());
        $error = $this->assertDelayqError('redis_unavailable', 503, fn () => self::client($server->url, retries: 2, retryDelayMs: 1)->topics());
        self::assertSame(0.0, $error->retryAfter);
        self::assertCount(3, $server->requests());
        $none = new FakeServer(['503:1'], self::serviceUrl());
        $error = $this->assertDelayqError('redis_unavailable', 503, fn () => self::client($none->url, retries: 0)->topics());
        self::assertSame(1.0, $error->retryAfter);
        self::assertCount(1, $none->requests());
    }

    public function testALongRetryAfterIsCappedByMaxRetryDelay(): void
    {
        $server = new FakeServer(['503:30', 'forward'], self::serviceUrl());
        $dq = new \Delayq\Client($server->url, self::env('DELAYQ_TOKEN'), retries: 1, maxRetryDelayMs: 200);
        $started = microtime(true);
        self::assertArrayHasKey('topics', $dq->topics());
        self::assertLessThan(2.0, microtime(true) - $started);
        self::assertCount(2, $server->requests());
    }

    public function testATimeoutIsRetriedThenReportedAsTimeout(): void
    {
        $server = new FakeServer(['stall', 'stall'], self::serviceUrl());
        $started = microtime(true);
        $this->assertDelayqError('timeout', 0, fn () => self::client($server->url, retries: 1, retryDelayMs: 1, timeoutMs: 300)->health());
        $elapsed = microtime(true) - $started;
        self::assertGreaterThanOrEqual(0.6, $elapsed);
        self::assertLessThan(3.0, $elapsed);
        self::assertCount(2, $server->requests());
    }

    public function testHealthAnswersADegraded503WithoutRetrying(): void
    {
        $server = new FakeServer(['degraded'], self::serviceUrl());
        $health = self::client($server->url, retries: 3)->health();
        self::assertSame('degraded', $health['status']);
        self::assertSame('unreachable', $health['redis']);
        self::assertCount(1, $server->requests());
    }

    public function testAnswersThatAreNotDelayqsJsonAreInvalidResponses(): void
    {
        $server = new FakeServer(['html', 'html502'], self::serviceUrl());
        $dq = self::client($server->url, retries: 3);
        $error = $this->assertDelayqError('invalid_response', 200, fn () => $dq->topics());
        self::assertStringContainsString('nginx', $error->getMessage());
        $this->assertDelayqError('invalid_response', 502, fn () => $dq->topics());
        self::assertCount(2, $server->requests(), 'a 502 is not retried');
    }
}
