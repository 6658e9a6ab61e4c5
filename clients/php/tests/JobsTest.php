<?php

// The job routes' happy paths through the client, against the running service.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\DelayqException;
use Delayq\Tests\Support\FakeServer;
use Delayq\Tests\Support\ServiceTestCase;

final class JobsTest extends ServiceTestCase
{
    public function testAddCreatesAJobThenFindsItAgain(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $first = $dq->add(['topic' => $topic, 'id' => self::uid('order-1'), 'delay' => 30, 'ttr' => 45,
            'maxAttempts' => 3, 'backoff' => 'wechatpay', 'body' => ['order' => 1042, 'note' => 'café']]);
        self::assertTrue($first['created']);
        $job = $first['job'];
        self::assertSame(self::uid('order-1'), $job['id']);
        self::assertSame($topic, $job['topic']);
        self::assertSame('delayed', $job['state']);
        self::assertSame(['order' => 1042, 'note' => 'café'], $job['body']);
        self::assertSame(45, $job['ttr']);
        self::assertSame(3, $job['maxAttempts']);
        self::assertSame('wechatpay', $job['backoff']);
        self::assertSame(0, $job['attempts']);
        self::assertIsInt($job['dueAt']);
        self::assertEqualsWithDelta($job['createdAt'] + 30000, $job['dueAt'], 5);

        $again = $dq->add(['topic' => $topic, 'id' => self::uid('order-1'), 'body' => 'other']);
        self::assertFalse($again['created']);
        self::assertSame(['order' => 1042, 'note' => 'café'], $again['job']['body']);
    }

    public function testAddWithoutAnIdGetsAUuidV4(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $a = $dq->add(['topic' => $topic, 'body' => 1])['job']['id'];
        $b = $dq->add(['topic' => $topic, 'body' => 2])['job']['id'];
        $uuid = '/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/';
        self::assertMatchesRegularExpression($uuid, $a);
        self::assertMatchesRegularExpression($uuid, $b);
        self::assertNotSame($a, $b);
        self::assertSame(2, $dq->topic($topic)['counts']['ready']);
    }

    public function testRunAtAndDeadlineAcceptIsoDates(): void
    {
        $dq = self::client();
        $at = (new \DateTimeImmutable('+1 hour'))->setTime(12, 0);
        $job = $dq->add(['topic' => self::topic(), 'runAt' => $at->format(DATE_RFC3339_EXTENDED),
            'deadline' => $at->modify('+1 day')->format(DATE_RFC3339)])['job'];
        self::assertSame($at->getTimestamp() * 1000, $job['dueAt']);
        self::assertSame(($at->getTimestamp() + 86400) * 1000, $job['deadline']);
    }

    public function testBodiesRoundTripAsJson(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $bodies = [
            'text' => 'plain text / with slashes',
            'null' => null,
            'list' => [1, 2.5, 'three', true],
            'nested' => ['a' => ['b' => ['c' => 'd']], 'emoji' => "\u{1F680}"],
            'float' => 0.1,
            'emptyObject' => new \stdClass(),
        ];
        foreach ($bodies as $id => $body) {
            $dq->add(['topic' => $topic, 'id' => self::uid($id), 'body' => $body]);
        }
        self::assertSame('plain text / with slashes', $dq->get(self::uid('text'))['body']);
        self::assertNull($dq->get(self::uid('null'))['body']);
        self::assertSame([1, 2.5, 'three', true], $dq->get(self::uid('list'))['body']);
        self::assertSame(['a' => ['b' => ['c' => 'd']], 'emoji' => "\u{1F680}"], $dq->get(self::uid('nested'))['body']);
        self::assertSame(0.1, $dq->get(self::uid('float'))['body']);
        // An empty JSON object decodes to an empty array (documented).
        self::assertSame([], $dq->get(self::uid('emptyObject'))['body']);
        [$status, $text] = self::rawRequest('GET', '/v1/jobs/' . self::uid('emptyObject'));
        self::assertSame(200, $status);
        self::assertStringContainsString('"body":{}', $text);
    }

    public function testIntegersBeyondPhpIntMaxComeBackAsStringsNotFloats(): void
    {
        // 10^19 is over PHP_INT_MAX; the service (JavaScript numbers) keeps it exactly, as an
        // integer literal. Decoded as a float it would print as 1.0E+19.
        $topic = self::topic();
        [$status, $text] = self::rawRequest('POST', '/v1/jobs', '{"topic":"' . $topic
            . '","id":"' . self::uid('big') . '","body":{"tradeNo":10000000000000000000,"small":42}}');
        self::assertSame(201, $status, $text);
        self::assertStringContainsString('"tradeNo":10000000000000000000', $text);
        $body = self::client()->get(self::uid('big'))['body'];
        self::assertSame('10000000000000000000', $body['tradeNo']);
        self::assertSame(42, $body['small']);
    }

    public function testBatchAddsEachItemOnItsOwn(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $results = $dq->addBatch([
            ['topic' => $topic, 'id' => self::uid('b1'), 'body' => 'a'],
            ['topic' => $topic, 'body' => 'b'],
            ['topic' => $topic, 'id' => self::uid('b3'), 'ttr' => 0],
            ['topic' => $topic, 'id' => self::uid('b1'), 'body' => 'again'],
        ]);
        self::assertCount(4, $results);
        self::assertTrue($results[0]['created']);
        self::assertTrue($results[1]['created']);
        self::assertMatchesRegularExpression('/^[0-9a-f-]{36}$/', $results[1]['job']['id']);
        self::assertSame('invalid_request', $results[2]['error']['code']);
        self::assertStringContainsString('ttr', $results[2]['error']['message']);
        self::assertFalse($results[3]['created']);
        self::assertSame('a', $results[3]['job']['body']);
        self::assertSame(2, $dq->topic($topic)['counts']['ready']);
    }

    public function testPopFinishAndGet(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->addBatch([
            ['topic' => $topic, 'id' => self::uid('p1'), 'body' => 1],
            ['topic' => $topic, 'id' => self::uid('p2'), 'body' => 2],
            ['topic' => $topic, 'id' => self::uid('p3'), 'body' => 3],
        ]);
        $jobs = $dq->pop($topic, count: 2);
        self::assertCount(2, $jobs);
        foreach ($jobs as $job) {
            self::assertSame('reserved', $job['state']);
            self::assertSame(1, $job['attempts']);
            self::assertIsString($job['receipt']);
            self::assertGreaterThan($job['dueAt'], $job['reservedUntil']);
            $dq->finish($job['id'], $job['receipt']);
            self::assertSame('finished', $dq->get($job['id'])['state']);
        }
        // finish is idempotent
        $dq->finish($jobs[0]['id'], $jobs[0]['receipt']);
        $rest = $dq->pop($topic, count: 10);
        self::assertCount(1, $rest);
        $dq->finish($rest[0]['id']);
        self::assertSame([], $dq->pop($topic));
        self::assertSame(0, $dq->topic($topic)['counts']['reserved']);
    }

    public function testFinishAndPopFinishesTheLastPopAndTakesTheNextInOneRequest(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('n0'), 'body' => ['n' => 0]]);
        $dq->add(['topic' => $topic, 'id' => self::uid('n1'), 'body' => ['n' => 1]]);
        $held = $dq->pop($topic);
        $missing = self::uid('n-missing');

        $server = new FakeServer([], self::serviceUrl());
        $next = self::client($server->url)->finishAndPop($topic, [...$held, ['id' => $missing]], wait: 1);
        self::assertSame(['finished' => true], $next['finished'][0]);
        self::assertSame('job_not_found', $next['finished'][1]['error']['code'] ?? null);
        self::assertSame([[self::uid('n1'), ['n' => 1]]], array_map(
            static fn (array $job): array => [$job['id'], $job['body']],
            $next['jobs'],
        ));
        self::assertSame('finished', $dq->get(self::uid('n0'))['state']);
        // one request: the pop, carrying the jobs to finish as ids and receipts
        $requests = $server->requests();
        self::assertCount(1, $requests);
        self::assertSame(['POST', "/v1/topics/{$topic}/pop"], [$requests[0]['method'], $requests[0]['path']]);
        self::assertSame(
            ['wait' => 1, 'finish' => [['id' => $held[0]['id'], 'receipt' => $held[0]['receipt']], ['id' => $missing]]],
            json_decode($requests[0]['body'], true),
        );
        self::assertSame(['jobs' => [], 'finished' => [['finished' => true]]], $dq->finishAndPop($topic, $next['jobs']));
        self::assertSame('finished', $dq->get(self::uid('n1'))['state']);
    }

    public function testWorkRunsEachJobOnceAndFinishesItInTheNextPop(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $ids = [self::uid('w0'), self::uid('w1'), self::uid('w2')];
        foreach ($ids as $id) {
            $dq->add(['topic' => $topic, 'id' => $id, 'body' => ['id' => $id]]);
        }
        $server = new FakeServer([], self::serviceUrl());
        $ran = [];
        $touched = [];
        self::client($server->url)->work(
            $topic,
            function (array $job, callable $touch) use (&$ran, &$touched): void {
                $ran[] = $job['id'];
                $touched[] = $touch()['state']; // extends the lease; the job is still reserved
            },
            wait: 1,
            shouldStop: static function () use (&$ran, $ids): bool {
                return count($ran) === count($ids);
            },
        );
        self::assertSame($ids, $ran);
        self::assertSame(['reserved', 'reserved', 'reserved'], $touched);
        foreach ($ids as $id) {
            self::assertSame('finished', $dq->get($id)['state']);
        }
        $paths = array_map(static fn (array $request): string => $request['method'] . ' ' . $request['path'], $server->requests());
        // Each job finished by the pop that took the next one, the last by a finishMany at the stop.
        self::assertSame([], array_values(array_filter($paths, static fn (string $path): bool => str_ends_with($path, '/finish') && $path !== 'POST /v1/jobs/finish')));
        self::assertContains('POST /v1/jobs/finish', $paths);
    }

    public function testWorkReleasesAJobWhoseHandlerThrowsAndEndsOnARefusedPop(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('bad'), 'maxAttempts' => 2]);
        $dq->add(['topic' => $topic, 'id' => self::uid('good')]);
        $errors = [];
        $dq->work(
            $topic,
            function (array $job): void {
                if ($job['id'] === self::uid('bad')) {
                    throw new \RuntimeException('no card on file');
                }
            },
            wait: 1,
            shouldStop: fn (): bool => $dq->get(self::uid('bad'))['state'] === 'dead'
                && $dq->get(self::uid('good'))['state'] === 'finished',
            onError: static function (\Throwable $error, ?array $job) use (&$errors): void {
                $errors[] = [$error->getMessage(), $job['id'] ?? null];
            },
        );
        // Released each time and (the topic has no backoff) run again at once, until out of attempts.
        self::assertSame([['no card on file', self::uid('bad')], ['no card on file', self::uid('bad')]], $errors);

        $hooks = self::topic();
        $dq->configureTopic($hooks, ['push' => ['url' => 'https://shop.example/hook']]);
        try {
            $dq->work($hooks, static fn (array $job): null => null, wait: 1);
            self::fail('a push topic\'s pop was not refused');
        } catch (DelayqException $refused) {
            self::assertSame('push_topic', $refused->errorCode);
        }
    }

    public function testFinishManyFinishesWhatAPopGaveInOneRequest(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->addBatch([
            ['topic' => $topic, 'id' => self::uid('m1'), 'body' => ['big' => str_repeat('x', 100)]],
            ['topic' => $topic, 'id' => self::uid('m2')],
            ['topic' => $topic, 'id' => self::uid('m3')],
        ]);
        $jobs = $dq->pop($topic, count: 3);
        self::assertCount(3, $jobs);
        // not reserved: refused, the others finish regardless
        $dq->add(['topic' => $topic, 'id' => self::uid('m-ready')]);
        $missing = self::uid('m-missing');

        $server = new FakeServer([], self::serviceUrl());
        $results = self::client($server->url)->finishMany(
            [...$jobs, ['id' => self::uid('m-ready')], ['id' => $missing, 'receipt' => null]],
        );
        self::assertSame([['finished' => true], ['finished' => true], ['finished' => true]], array_slice($results, 0, 3));
        self::assertSame('not_reserved', $results[3]['error']['code'] ?? null);
        self::assertSame('job_not_found', $results[4]['error']['code'] ?? null);
        self::assertStringContainsString($missing, $results[4]['error']['message'] ?? '');
        self::assertCount(5, $results);

        // one request, with only each job's id and receipt (none when it has none)
        $requests = $server->requests();
        self::assertCount(1, $requests);
        self::assertSame(['POST', '/v1/jobs/finish'], [$requests[0]['method'], $requests[0]['path']]);
        $sent = array_map(static fn (array $job): array => ['id' => $job['id'], 'receipt' => $job['receipt']], $jobs);
        $sent[] = ['id' => self::uid('m-ready')];
        $sent[] = ['id' => $missing];
        self::assertSame(['jobs' => $sent], json_decode($requests[0]['body'], true));

        foreach ($jobs as $job) {
            self::assertSame('finished', $dq->get($job['id'])['state']);
        }
        self::assertSame('ready', $dq->get(self::uid('m-ready'))['state']);
        self::assertSame(['delayed' => 0, 'ready' => 1, 'reserved' => 0, 'dead' => 0], $dq->topic($topic)['counts']);
        // again with the same receipts: finishing a finished job succeeds
        self::assertSame(array_fill(0, 3, ['finished' => true]), $dq->finishMany($jobs));
        // an item made by hand goes as it is: a misspelt receipt is refused, not dropped
        [$refused] = $dq->finishMany([['id' => self::uid('m-ready'), 'reciept' => 'p1.x']]);
        self::assertSame('invalid_request', $refused['error']['code'] ?? null);
        self::assertStringContainsString('reciept', $refused['error']['message'] ?? '');

        // a job read with get while ready (no receipt) goes as it is too, not cut down to its
        // id (which would finish it for whoever holds it): a misspelt receipt on it is refused
        $got = $dq->get(self::uid('m-ready'));
        self::assertSame('ready', $got['state']);
        self::assertArrayNotHasKey('receipt', $got);
        [$popped] = $dq->pop($topic);
        self::assertSame(self::uid('m-ready'), $popped['id']);
        [$refused] = $dq->finishMany([[...$got, 'reciept' => $popped['receipt']]]);
        self::assertSame('invalid_request', $refused['error']['code'] ?? null);
        self::assertStringContainsString('reciept', $refused['error']['message'] ?? '');
        self::assertSame('reserved', $dq->get($popped['id'])['state']);
        self::assertSame([['finished' => true]], $dq->finishMany([[...$got, 'receipt' => $popped['receipt']]]));

        // what an empty pop gave: nothing to send
        $before = count($server->requests());
        $via = self::client($server->url);
        self::assertSame([], $via->finishMany($via->pop($topic . '-none')));
        self::assertCount($before + 1, $server->requests()); // the pop alone
    }

    public function testTouchExtendsTheLease(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('touch-me'), 'ttr' => 5]);
        [$job] = $dq->pop($topic);
        usleep(300_000);
        $touched = $dq->touch(self::uid('touch-me'), $job['receipt']);
        self::assertSame('reserved', $touched['state']);
        self::assertGreaterThanOrEqual($job['reservedUntil'] + 250, $touched['reservedUntil']);
    }

    public function testReleaseGivesTheJobBackAfterADelay(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('rel'), 'body' => 'x']);
        [$job] = $dq->pop($topic);
        $released = $dq->release(self::uid('rel'), $job['receipt'], 60);
        self::assertSame('delayed', $released['state']);
        self::assertGreaterThanOrEqual($job['dueAt'] + 60000, $released['dueAt']);
        self::assertSame(1, $dq->topic($topic)['counts']['delayed']);
        // without a delay: ready again at once (no backoff)
        $dq->add(['topic' => $topic, 'id' => self::uid('rel2')]);
        [$job2] = $dq->pop($topic);
        self::assertSame(self::uid('rel2'), $job2['id']);
        self::assertSame('ready', $dq->release(self::uid('rel2'), $job2['receipt'])['state']);
        self::assertSame(2, $dq->pop($topic)[0]['attempts']);
    }

    public function testBuryKickAndTheDeadLetter(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->addBatch([
            ['topic' => $topic, 'id' => self::uid('d1')],
            ['topic' => $topic, 'id' => self::uid('d2')],
            ['topic' => $topic, 'id' => self::uid('d3')],
        ]);
        foreach ($dq->pop($topic, count: 3) as $job) {
            $buried = $dq->bury($job['id'], $job['receipt']);
            self::assertSame('dead', $buried['state']);
            self::assertSame('buried', $buried['deadReason']);
        }
        $dead = $dq->listJobs($topic, 'dead');
        self::assertSame(array_map(self::uid(...), ['d1', 'd2', 'd3']), self::ids($dead['jobs']));
        self::assertSame(3, $dq->topic($topic)['counts']['dead']);

        self::assertSame(1, $dq->kick($topic, ids: [self::uid('d2')]));
        $kicked = $dq->get(self::uid('d2'));
        self::assertSame('ready', $kicked['state']);
        self::assertSame(0, $kicked['attempts']);
        self::assertSame(1, $dq->kick($topic, count: 1));
        self::assertSame(1, $dq->deleteDead($topic, count: 5));
        self::assertSame(0, $dq->topic($topic)['counts']['dead']);
        self::assertSame(2, $dq->topic($topic)['counts']['ready']);
        self::assertSame(0, $dq->kick($topic));
        self::assertSame(0, $dq->deleteDead($topic));
    }

    public function testDeleteInAnyStateAndAgain(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('gone'), 'delay' => 100]);
        $dq->delete(self::uid('gone'));
        self::assertSame('deleted', $dq->get(self::uid('gone'))['state']);
        $dq->delete(self::uid('gone'));
        self::assertSame(0, $dq->topic($topic)['counts']['delayed']);
    }

    public function testListJobsPagesWithACursor(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $jobs = [];
        for ($i = 0; $i < 5; $i++) {
            $jobs[] = ['topic' => $topic, 'id' => self::uid("l{$i}"), 'delay' => 10 + $i];
        }
        $dq->addBatch($jobs);
        $seen = [];
        $cursor = null;
        $pages = 0;
        do {
            $page = $dq->listJobs($topic, 'delayed', cursor: $cursor, limit: 2);
            self::assertLessThanOrEqual(2, count($page['jobs']));
            $seen = array_merge($seen, self::ids($page['jobs']));
            $cursor = $page['cursor'] ?? null;
            self::assertSame($cursor !== null, $page['hasMore']);
            $pages++;
        } while ($page['hasMore'] && $pages < 10);
        self::assertSame(array_map(self::uid(...), ['l0', 'l1', 'l2', 'l3', 'l4']), $seen);
        self::assertSame(3, $pages);
        self::assertSame([], $dq->listJobs($topic, 'reserved')['jobs']);
    }

    public function testIdsWithReservedCharactersTravelInThePath(): void
    {
        $dq = self::client();
        $topic = self::topic('php:with.dots');
        $id = self::uid('user@shop+1=a~b:c');
        $dq->add(['topic' => $topic, 'id' => $id]);
        self::assertSame($id, $dq->get($id)['id']);
        [$job] = $dq->pop($topic);
        self::assertSame($id, $job['id']);
        $dq->finish($id, $job['receipt']);
        self::assertSame('finished', $dq->get($id)['state']);
    }

    /**
     * @param list<array{id: string}> $jobs
     * @return list<string>
     */
    private static function ids(array $jobs): array
    {
        return array_map(static fn (array $job): string => $job['id'], $jobs);
    }
}
