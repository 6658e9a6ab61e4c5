<?php

// What the client sends for the routes being built (PATCH topics, payment watches), checked on a
// scripted server that answers as the spec says: these run even before the service serves them.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Tests\Support\FakeServer;
use Delayq\Tests\Support\ServiceTestCase;

final class WireTest extends ServiceTestCase
{
    private static function reply(int $status, mixed $body): string
    {
        return "json:{$status}:" . base64_encode((string) json_encode($body));
    }

    public function testUpdateTopicSendsAPatchWhereNullRemovesAField(): void
    {
        $config = ['ttr' => 45, 'push' => ['url' => 'https://shop.example/hook', 'via' => 'direct', 'secret' => '…abcd']];
        $server = new FakeServer([self::reply(200, ['topic' => 'orders', 'config' => $config])]);
        $answer = self::client($server->url)->updateTopic('orders', ['ttr' => 45, 'maxAttempts' => null]);
        self::assertSame($config, $answer);
        [$request] = $server->requests();
        self::assertSame('PATCH', $request['method']);
        self::assertSame('/v1/topics/orders', $request['path']);
        self::assertSame('{"ttr":45,"maxAttempts":null}', $request['body']);
    }

    public function testWatchPaymentPostsTheWatchAsGiven(): void
    {
        $payment = ['provider' => 'wechatpay', 'account' => 'shop', 'outTradeNo' => 'o/1 2', 'state' => 'polling',
            'polls' => 0, 'createdAt' => 1, 'deadline' => 2, 'notify' => ['paid'], 'metadata' => null];
        $server = new FakeServer([
            self::reply(201, ['created' => true, 'payment' => $payment]),
            self::reply(200, ['payment' => $payment]),
            self::reply(200, ['deleted' => true]),
            self::reply(404, ['error' => ['code' => 'payment_not_found', 'message' => 'No watch']]),
        ]);
        $dq = self::client($server->url);
        $watch = ['provider' => 'wechatpay', 'account' => 'shop', 'outTradeNo' => 'o/1 2', 'notify' => ['paid'],
            'schedule' => 'wechatpay', 'deadline' => '2030-01-01T00:00:00Z', 'closeOnDeadline' => true];
        self::assertSame(['created' => true, 'payment' => $payment], $dq->watchPayment($watch));
        self::assertSame($payment, $dq->getPayment('wechatpay', 'shop', 'o/1 2'));
        $dq->stopPayment('wechatpay', 'shop', 'o/1 2');
        $this->assertDelayqError('payment_not_found', 404, fn () => $dq->getPayment('wechatpay', 'shop', 'o/1 2'));
        $requests = $server->requests();
        self::assertSame(['POST', '/v1/payments'], [$requests[0]['method'], $requests[0]['path']]);
        self::assertSame($watch, json_decode($requests[0]['body'], true));
        // the order number is one encoded path segment
        self::assertSame(['GET', '/v1/payments/wechatpay/shop/o%2F1%202'], [$requests[1]['method'], $requests[1]['path']]);
        self::assertSame(['DELETE', '/v1/payments/wechatpay/shop/o%2F1%202'], [$requests[2]['method'], $requests[2]['path']]);
        self::assertSame('', $requests[2]['body']);
        self::assertCount(4, $requests);
    }

    public function testAnswersMissingTheExpectedFieldAreInvalidResponses(): void
    {
        $server = new FakeServer([self::reply(200, ['config' => 'nope']), self::reply(200, ['payment' => 1]),
            self::reply(200, ['success' => true]), self::reply(200, [['success' => true, 'error' => '']])]);
        $dq = self::client($server->url);
        $this->assertDelayqError('invalid_response', 200, fn () => $dq->updateTopic('t', ['ttr' => 5]));
        $this->assertDelayqError('invalid_response', 200, fn () => $dq->getPayment('alipay', 'a', 'o'));
        // a list answer where one result was asked for, and the other way round
        $this->assertDelayqError('invalid_response', 200, fn () => $dq->command([['command' => 'pop', 'topic' => 't']]));
        $this->assertDelayqError('invalid_response', 200, fn () => $dq->command(['command' => 'pop', 'topic' => 't']));
    }

    public function testALoneCommandsRedisFailureIsA503RetriedThenThrown(): void
    {
        $failure = ['success' => false, 'error' => 'redis_unavailable: Redis does not answer'];
        $server = new FakeServer([self::reply(503, $failure), self::reply(503, $failure)]);
        $error = $this->assertDelayqError('redis_unavailable', 503, fn () => self::client($server->url, retries: 1)->command(['command' => 'get', 'id' => 'x']));
        self::assertSame('Redis does not answer', $error->getMessage());
        self::assertCount(2, $server->requests());
    }
}
