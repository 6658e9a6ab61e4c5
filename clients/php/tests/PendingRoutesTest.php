<?php

// Routes being built while this client was written: PATCH /v1/topics/{topic}, push config, and
// payment watches. Each test skips ("route not served yet: ...") until the service's OpenAPI
// document lists its route, then runs by itself.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Tests\Support\FakeServer;
use Delayq\Tests\Support\ServiceTestCase;
use Delayq\Webhook;

final class PendingRoutesTest extends ServiceTestCase
{
    public function testUpdateTopicChangesOnlyTheFieldsGiven(): void
    {
        $this->requireRoute('PATCH', '/v1/topics/{topic}');
        $dq = self::client();
        $topic = self::topic();
        $dq->configureTopic($topic, ['ttr' => 30, 'maxAttempts' => 4, 'paused' => true]);
        $config = $dq->updateTopic($topic, ['ttr' => 45]);
        self::assertSame(45, $config['ttr']);
        self::assertSame(4, $config['maxAttempts']);
        self::assertTrue($config['paused']);
        // null removes a field
        $config = $dq->updateTopic($topic, ['maxAttempts' => null, 'paused' => false]);
        self::assertArrayNotHasKey('maxAttempts', $config);
        self::assertFalse($config['paused'] ?? false);
        self::assertSame(45, $config['ttr']);
        self::assertSame($config, $dq->topic($topic)['config']);
        // an empty change is sent as {} and changes nothing
        self::assertSame($config, $dq->updateTopic($topic, []));
        $this->assertDelayqError('invalid_request', 400, fn () => $dq->updateTopic($topic, ['ttr' => 0]));
        $this->assertDelayqError('forbidden', 403, fn () => self::scopedClient()->updateTopic($topic, ['ttr' => 5]));
    }

    public function testAPushConfigMasksItsSecretAndRefusesPop(): void
    {
        $this->requirePushConfig();
        $dq = self::client();
        $topic = self::topic();
        $secret = 'whsec-php-' . bin2hex(random_bytes(8));
        $config = $dq->configureTopic($topic, ['push' => ['url' => 'http://127.0.0.1:9/hook', 'secret' => $secret,
            'timeout' => 5, 'headers' => ['X-Api-Key' => 'k']]]);
        self::assertSame('http://127.0.0.1:9/hook', $config['push']['url']);
        self::assertSame('direct', $config['push']['via']);
        self::assertNotSame($secret, $config['push']['secret'] ?? null, 'a given secret is never echoed');
        self::assertStringNotContainsString($secret, (string) json_encode($dq->topic($topic)));
        $this->assertDelayqError('push_topic', 409, fn () => $dq->pop($topic));
        // sent again without a secret, the stored one is kept (still masked)
        $kept = $dq->configureTopic($topic, ['push' => ['url' => 'http://127.0.0.1:9/hook']])['push']['secret'];
        self::assertSame('…' . substr($secret, -4), $kept);
        // push null: pulled again
        self::assertNull($dq->configureTopic($topic, ['push' => null])['push'] ?? null);
        self::assertSame([], $dq->pop($topic));
        // a topic with no secret yet gets a generated one, shown once, then masked
        $generated = $dq->configureTopic($topic, ['push' => ['url' => 'http://127.0.0.1:9/hook']])['push']['secret'];
        self::assertGreaterThanOrEqual(16, strlen($generated));
        self::assertNotSame($generated, $dq->topic($topic)['config']['push']['secret'] ?? null);
    }

    public function testAPushDeliveryVerifiesWithWebhookVerify(): void
    {
        $this->requirePushConfig();
        $receiver = new FakeServer([]);
        $dq = self::client();
        $topic = self::topic();
        $secret = 'whsec-php-' . bin2hex(random_bytes(8));
        $dq->configureTopic($topic, ['push' => ['url' => "{$receiver->url}/hook", 'secret' => $secret]]);
        $id = self::uid('pushed');
        $dq->add(['topic' => $topic, 'id' => $id, 'body' => ['order' => 7]]);
        $deadline = microtime(true) + 15;
        while ($receiver->requests() === [] && microtime(true) < $deadline) {
            usleep(100_000);
        }
        $requests = $receiver->requests();
        self::assertNotEmpty($requests, 'no delivery within 15 s');
        $delivery = $requests[0];
        self::assertSame('/hook', $delivery['path']);
        self::assertTrue(Webhook::verify($secret, $delivery['headers'][Webhook::HEADER] ?? null, $delivery['body']));
        self::assertFalse(Webhook::verify($secret . 'x', $delivery['headers'][Webhook::HEADER] ?? null, $delivery['body']));
        $body = json_decode($delivery['body'], true, 512, JSON_THROW_ON_ERROR);
        self::assertSame([$id, $topic, ['order' => 7]], [$body['id'], $body['topic'], $body['body']]);
        $deadline = microtime(true) + 5;
        while ($dq->get($id)['state'] !== 'finished' && microtime(true) < $deadline) {
            usleep(100_000);
        }
        self::assertSame('finished', $dq->get($id)['state'], 'a 200 with an empty body finishes the job');
    }

    public function testAPaymentWatchStartsIsFoundAndStops(): void
    {
        $this->requireRoute('POST', '/v1/payments');
        $account = getenv('DELAYQ_PAYMENT_ACCOUNT');
        if (!is_string($account) || $account === '') {
            self::markTestSkipped('no payment account configured: set DELAYQ_PAYMENT_ACCOUNT (an alipay account of the service)');
        }
        $dq = self::client();
        $notify = self::topic('php-pay');
        $order = self::uid('order');
        $watch = ['provider' => 'alipay', 'account' => $account, 'outTradeNo' => $order, 'notify' => [$notify],
            'schedule' => [60], 'metadata' => ['cart' => 12]];
        $first = $dq->watchPayment($watch);
        self::assertTrue($first['created']);
        self::assertSame('polling', $first['payment']['state']);
        self::assertSame([$notify], $first['payment']['notify']);
        self::assertSame(['cart' => 12], $first['payment']['metadata']);
        self::assertFalse($dq->watchPayment($watch)['created']);
        $found = $dq->getPayment('alipay', $account, $order);
        self::assertSame([$order, 'alipay', $account], [$found['outTradeNo'], $found['provider'], $found['account']]);
        $dq->stopPayment('alipay', $account, $order);
        self::assertSame('stopped', $dq->getPayment('alipay', $account, $order)['state']);
    }

    public function testPaymentErrorsCarryTheirCodes(): void
    {
        $this->requireRoute('POST', '/v1/payments');
        $dq = self::client();
        $this->assertDelayqError('unknown_account', 400, fn () => $dq->watchPayment(['provider' => 'alipay',
            'account' => 'no-such-account', 'outTradeNo' => self::uid('o'), 'notify' => [self::topic()]]));
        $this->assertDelayqError('invalid_request', 400, fn () => $dq->watchPayment(['provider' => 'paypal',
            'account' => 'x', 'outTradeNo' => self::uid('o'), 'notify' => [self::topic()]]));
        $account = getenv('DELAYQ_PAYMENT_ACCOUNT');
        if (is_string($account) && $account !== '') {
            $this->assertDelayqError('payment_not_found', 404, fn () => $dq->getPayment('alipay', $account, self::uid('never')));
        }
    }

    public function testARefundWatchStartsIsFoundAndStops(): void
    {
        $this->requireRoute('POST', '/v1/refunds');
        $account = getenv('DELAYQ_PAYMENT_ACCOUNT');
        if (!is_string($account) || $account === '') {
            self::markTestSkipped('no payment account configured: set DELAYQ_PAYMENT_ACCOUNT (an alipay account of the service)');
        }
        $dq = self::client();
        $notify = self::topic('php-refund');
        $order = self::uid('refund-order');
        $refundNo = self::uid('refund') . '-' . bin2hex(random_bytes(3));
        $watch = ['provider' => 'alipay', 'account' => $account, 'outRefundNo' => $refundNo,
            'outTradeNo' => $order, 'notify' => [$notify], 'schedule' => [3600], 'metadata' => ['ticket' => 3]];
        $first = $dq->watchRefund($watch);
        self::assertTrue($first['created']);
        self::assertSame('polling', $first['refund']['state']);
        self::assertSame($order, $first['refund']['outTradeNo'] ?? null);
        self::assertSame([$notify], $first['refund']['notify']);
        self::assertSame(['ticket' => 3], $first['refund']['metadata']);
        self::assertSame(3_600_000, ($first['refund']['nextPollAt'] ?? 0) - $first['refund']['createdAt']);
        self::assertFalse($dq->watchRefund($watch)['created']);
        $found = $dq->getRefund('alipay', $account, $refundNo);
        self::assertSame([$refundNo, 'alipay', $account], [$found['outRefundNo'], $found['provider'], $found['account']]);
        $dq->stopRefund('alipay', $account, $refundNo);
        self::assertSame('stopped', $dq->getRefund('alipay', $account, $refundNo)['state']);
    }

    public function testRefundErrorsCarryTheirCodes(): void
    {
        $this->requireRoute('POST', '/v1/refunds');
        $dq = self::client();
        $this->assertDelayqError('unknown_account', 400, fn () => $dq->watchRefund(['provider' => 'wechatpay',
            'account' => 'no-such-account', 'outRefundNo' => self::uid('r'), 'notify' => [self::topic()]]));
        $account = getenv('DELAYQ_PAYMENT_ACCOUNT');
        if (is_string($account) && $account !== '') {
            $this->assertDelayqError('invalid_request', 400, fn () => $dq->watchRefund(['provider' => 'alipay',
                'account' => $account, 'outRefundNo' => self::uid('r'), 'notify' => [self::topic()]]));
            $this->assertDelayqError('refund_not_found', 404, fn () => $dq->getRefund('alipay', $account, self::uid('never')));
        }
    }

    /** Skips until PUT /v1/topics/{topic} accepts a `push` field. */
    private function requirePushConfig(): void
    {
        $this->requireRoute('PUT', '/v1/topics/{topic}');
        $operation = self::openapi()['paths']['/v1/topics/{topic}']['put'];
        $schema = self::resolve($operation['requestBody']['content']['application/json']['schema'] ?? []);
        if (!array_key_exists('push', $schema['properties'] ?? [])) {
            self::markTestSkipped('route not served yet: PUT /v1/topics/{topic} with a push config');
        }
    }
}
