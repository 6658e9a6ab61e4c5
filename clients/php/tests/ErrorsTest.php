<?php

// Every documented error reaches the caller as DelayqException with the API's code and status.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Client;
use Delayq\Tests\Support\ServiceTestCase;

final class ErrorsTest extends ServiceTestCase
{
    public function testInvalidRequestNamesTheField(): void
    {
        $dq = self::client();
        $error = $this->assertDelayqError('invalid_request', 400, fn () => $dq->add(['topic' => self::topic(), 'dealy' => 5]));
        self::assertStringContainsString('dealy', $error->getMessage());
        self::assertSame(400, $error->getCode());
        self::assertInstanceOf(\RuntimeException::class, $error);
        $this->assertDelayqError('invalid_request', 400, fn () => $dq->add(['topic' => 'bad topic!']));
        $this->assertDelayqError('invalid_request', 400, fn () => $dq->pop(self::topic(), count: 101));
        $this->assertDelayqError('invalid_request', 400, fn () => $dq->pop(self::topic(), wait: 21));
        $this->assertDelayqError('invalid_request', 400, fn () => $dq->listJobs(self::topic(), 'finished'));
        $this->assertDelayqError('invalid_request', 400, fn () => $dq->kick(self::topic(), ids: ['a'], count: 1));
        $this->assertDelayqError('invalid_request', 400, fn () => $dq->configureTopic(self::topic(), ['ttr' => 0]));
    }

    public function testPathSegmentsThatUrlsWouldResolveAreRefusedBeforeSending(): void
    {
        // A wrong base URL shows nothing is sent: that would be a network error.
        $dq = new Client('http://127.0.0.1:1', 'token', retries: 0);
        foreach (['.', '..', ''] as $id) {
            $this->assertDelayqError('invalid_request', 0, fn () => $dq->get($id));
        }
        $this->assertDelayqError('invalid_request', 0, fn () => $dq->pop('..'));
        $this->assertDelayqError('invalid_request', 0, fn () => $dq->add(['topic' => 't', 'body' => "\xff"]));
        $this->assertDelayqError('invalid_request', 0, fn () => $dq->command([['topic' => 't']]));
    }

    public function testAWrongTokenIsUnauthorized(): void
    {
        $dq = new Client(self::serviceUrl(), 'wrong-token');
        $error = $this->assertDelayqError('unauthorized', 401, fn () => $dq->topic(self::topic()));
        self::assertNull($error->retryAfter);
        $this->assertDelayqError('unauthorized', 401, fn () => $dq->add(['topic' => self::topic()]));
    }

    public function testAScopedTokenIsForbiddenOtherTopics(): void
    {
        $shop = self::scopedClient();
        $mine = self::topic('shop.php');
        $added = $shop->add(['topic' => $mine, 'id' => self::uid('scoped')]);
        self::assertTrue($added['created']);
        self::assertSame(self::uid('scoped'), $shop->pop($mine)[0]['id']);
        $other = self::topic('other');
        self::client()->add(['topic' => $other, 'id' => self::uid('not-yours')]);
        $this->assertDelayqError('forbidden', 403, fn () => $shop->add(['topic' => $other]));
        $this->assertDelayqError('forbidden', 403, fn () => $shop->pop($other));
        $this->assertDelayqError('forbidden', 403, fn () => $shop->topic($other));
        $this->assertDelayqError('forbidden', 403, fn () => $shop->configureTopic($other, ['paused' => true]));
        // the other topic's job is neither seen nor touched, and reads as missing: the status
        // must not tell whether the id exists
        $error = $this->assertDelayqError('job_not_found', 404, fn () => $shop->get(self::uid('not-yours')));
        self::assertStringNotContainsString('"body"', $error->getMessage());
        $this->assertDelayqError('job_not_found', 404, fn () => $shop->delete(self::uid('not-yours')));
        self::assertSame('ready', self::client()->get(self::uid('not-yours'))['state']);
    }

    public function testUnknownJobsAreNotFound(): void
    {
        $dq = self::client();
        $id = self::uid('missing');
        $error = $this->assertDelayqError('job_not_found', 404, fn () => $dq->get($id));
        // the answer's x-request-id, to quote to the operator
        self::assertMatchesRegularExpression('/^[0-9a-f-]{36}$/', (string) $error->requestId);
        $this->assertDelayqError('job_not_found', 404, fn () => $dq->delete($id));
        $this->assertDelayqError('job_not_found', 404, fn () => $dq->finish($id));
        $this->assertDelayqError('job_not_found', 404, fn () => $dq->touch($id));
        $this->assertDelayqError('job_not_found', 404, fn () => $dq->release($id));
        $this->assertDelayqError('job_not_found', 404, fn () => $dq->bury($id));
    }

    public function testAnIdUsedByAnotherTopicIsJobExists(): void
    {
        $dq = self::client();
        $dq->add(['topic' => self::topic(), 'id' => self::uid('taken')]);
        $this->assertDelayqError('job_exists', 409, fn () => $dq->add(['topic' => self::topic(), 'id' => self::uid('taken')]));
    }

    public function testReplacingAReservedJobIsJobReserved(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('held'), 'body' => 1]);
        $dq->pop($topic);
        $this->assertDelayqError('job_reserved', 409, fn () => $dq->add(['topic' => $topic, 'id' => self::uid('held'), 'body' => 2, 'replace' => true]));
    }

    public function testActingOnAJobNobodyHoldsIsNotReserved(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('idle'), 'delay' => 60]);
        $this->assertDelayqError('not_reserved', 409, fn () => $dq->finish(self::uid('idle')));
        $this->assertDelayqError('not_reserved', 409, fn () => $dq->touch(self::uid('idle')));
        $this->assertDelayqError('not_reserved', 409, fn () => $dq->release(self::uid('idle')));
        $this->assertDelayqError('not_reserved', 409, fn () => $dq->bury(self::uid('idle')));
    }

    public function testAnEndedReservationsReceiptIsStale(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('stale')]);
        [$first] = $dq->pop($topic);
        $dq->release(self::uid('stale'), $first['receipt']);
        [$second] = $dq->pop($topic);
        self::assertNotSame($first['receipt'], $second['receipt']);
        $this->assertDelayqError('stale_receipt', 409, fn () => $dq->finish(self::uid('stale'), $first['receipt']));
        $this->assertDelayqError('stale_receipt', 409, fn () => $dq->touch(self::uid('stale'), $first['receipt']));
        $dq->finish(self::uid('stale'), $second['receipt']);
    }

    public function testABodyOverTheLimitIsPayloadTooLarge(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $this->assertDelayqError('payload_too_large', 413, fn () => $dq->add(['topic' => $topic, 'body' => str_repeat('x', 300 * 1024)]));
        self::assertSame(0, $dq->topic($topic)['counts']['ready']);
    }

    public function testConstructorArgumentsAreChecked(): void
    {
        $messages = [];
        foreach ([['', 't'], ['ftp://x', 't'], ['http://127.0.0.1', '']] as [$url, $token]) {
            try {
                new Client($url, $token);
            } catch (\InvalidArgumentException $error) {
                $messages[] = $error->getMessage();
            }
        }
        self::assertCount(3, $messages);
        $this->expectException(\InvalidArgumentException::class);
        new Client('http://127.0.0.1', 't', retries: -1);
    }
}
