<?php

// The command protocol (POST /v1/command) through Client::command, one command or a list.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Tests\Support\ServiceTestCase;

final class CommandTest extends ServiceTestCase
{
    public function testALoneCommandAnswersOneResult(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $id = self::uid('cmd');
        $added = $dq->command(['command' => 'add', 'topic' => $topic, 'id' => $id, 'delay' => 0,
            'TTR' => 30, 'body' => ['a' => 1]]);
        self::assertSame(['success' => true, 'error' => '', 'id' => $id, 'created' => true], $added);
        $popped = $dq->command(['command' => 'pop', 'topic' => $topic]);
        self::assertTrue($popped['success']);
        self::assertSame($id, $popped['id']);
        self::assertIsString($popped['receipt']);
        self::assertSame(['a' => 1], $popped['value']);
        $got = $dq->command(['command' => 'get', 'id' => $id]);
        self::assertSame('reserved', $got['value']['state']);
        self::assertSame(30, $got['value']['ttr']);
        self::assertSame('reserved', $dq->command(['command' => 'touch', 'id' => $id])['value']['state']);
        self::assertSame(['success' => true, 'error' => '', 'id' => $id], $dq->command(['command' => 'finish', 'id' => $id]));
        self::assertSame('finished', $dq->get($id)['state']);
        // nothing ready: success without an id
        self::assertSame(['success' => true, 'error' => ''], $dq->command(['command' => 'pop', 'topic' => $topic]));
    }

    public function testAFailedCommandIsAResultNotAnException(): void
    {
        $dq = self::client();
        $result = $dq->command(['command' => 'finish', 'id' => self::uid('nobody')]);
        self::assertFalse($result['success']);
        self::assertStringStartsWith('job_not_found: ', $result['error']);
        self::assertSame(self::uid('nobody'), $result['id']);
        $invalid = $dq->command(['command' => 'add', 'topic' => self::topic(), 'dealy' => 1]);
        self::assertFalse($invalid['success']);
        self::assertStringStartsWith('invalid_request: ', $invalid['error']);
        self::assertStringContainsString('dealy', $invalid['error']);
    }

    public function testAListRunsInOrderWithOneResultEach(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $results = $dq->command([
            ['command' => 'add', 'topic' => $topic, 'body' => 'first'],
            ['command' => 'add', 'topic' => $topic, 'id' => self::uid('second'), 'body' => 'second', 'delay' => 60],
            ['command' => 'pop', 'topic' => $topic],
            ['command' => 'delete', 'id' => self::uid('second')],
            ['command' => 'delete', 'id' => self::uid('never')],
        ]);
        self::assertCount(5, $results);
        self::assertTrue($results[0]['success']);
        // the id-less add got a UUID from the client
        self::assertMatchesRegularExpression('/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/', $results[0]['id']);
        self::assertSame($results[0]['id'], $results[2]['id']);
        self::assertSame('first', $results[2]['value']);
        self::assertTrue($results[3]['success']);
        self::assertFalse($results[4]['success']);
        self::assertStringStartsWith('job_not_found: ', $results[4]['error']);
        self::assertSame('deleted', $dq->get(self::uid('second'))['state']);
    }

    public function testReleaseAndBuryAnswerTheJob(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->command([
            ['command' => 'add', 'topic' => $topic, 'id' => self::uid('r1')],
            ['command' => 'add', 'topic' => $topic, 'id' => self::uid('r2')],
        ]);
        [$one, $two] = $dq->command([['command' => 'pop', 'topic' => $topic], ['command' => 'pop', 'topic' => $topic]]);
        $released = $dq->command(['command' => 'release', 'id' => $one['id'], 'delay' => 30]);
        self::assertSame('delayed', $released['value']['state']);
        $buried = $dq->command(['command' => 'bury', 'id' => $two['id']]);
        self::assertSame('dead', $buried['value']['state']);
    }

    public function testPopWithWaitLongPollsForAJobDueSoon(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->command(['command' => 'add', 'topic' => $topic, 'id' => self::uid('soon'), 'delay' => 1]);
        $started = microtime(true);
        $result = $dq->command(['command' => 'pop', 'topic' => $topic, 'wait' => 5]);
        $elapsed = microtime(true) - $started;
        self::assertSame(self::uid('soon'), $result['id'] ?? null);
        self::assertGreaterThan(0.5, $elapsed);
        self::assertLessThan(4, $elapsed);
    }
}
