<?php

// Topics (list, stats, config, pause) and health through the client, against the running service.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Tests\Support\ServiceTestCase;

final class TopicsTest extends ServiceTestCase
{
    public function testTopicStatsCountEachState(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->addBatch([
            ['topic' => $topic, 'id' => self::uid('s1'), 'delay' => 60],
            ['topic' => $topic, 'id' => self::uid('s2')],
            ['topic' => $topic, 'id' => self::uid('s3')],
        ]);
        [$job] = $dq->pop($topic);
        $stats = $dq->topic($topic);
        self::assertSame($topic, $stats['topic']);
        self::assertSame(['delayed' => 1, 'ready' => 1, 'reserved' => 1, 'dead' => 0], $stats['counts']);
        self::assertIsInt($stats['oldestDueAt']);
        self::assertSame([], $stats['config']);
        $dq->finish($job['id']);
    }

    public function testAnUnusedTopicReadsAsEmpty(): void
    {
        $stats = self::client()->topic(self::topic('never-used'));
        self::assertSame(['delayed' => 0, 'ready' => 0, 'reserved' => 0, 'dead' => 0], $stats['counts']);
        self::assertArrayNotHasKey('oldestDueAt', $stats);
    }

    public function testTopicsPageByName(): void
    {
        $dq = self::client();
        $prefix = self::topic('php-list');
        $names = ["{$prefix}-a", "{$prefix}-b", "{$prefix}-c"];
        foreach ($names as $name) {
            $dq->add(['topic' => $name, 'delay' => 60]);
        }
        // Start just before our names: "-" sorts before "-a".
        $page = $dq->topics(cursor: "{$prefix}-", limit: 2);
        self::assertSame([$names[0], $names[1]], array_column($page['topics'], 'topic'));
        self::assertSame(1, $page['topics'][0]['counts']['delayed']);
        self::assertArrayHasKey('cursor', $page);
        self::assertTrue($page['hasMore']);
        $next = $dq->topics(cursor: $page['cursor'], limit: 2);
        self::assertSame($names[2], $next['topics'][0]['topic']);
        // `after`, the parameter's former name, still pages.
        self::assertSame($names[2], $dq->topics(after: $page['cursor'], limit: 2)['topics'][0]['topic']);
        $all = $dq->topics();
        self::assertContains($names[1], array_column($all['topics'], 'topic'));
    }

    public function testConfigureTopicSetsDefaultsForNewJobs(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $config = $dq->configureTopic($topic, ['ttr' => 30, 'maxAttempts' => 4,
            'backoff' => ['type' => 'exponential', 'delay' => 2]]);
        self::assertSame(30, $config['ttr']);
        self::assertSame(4, $config['maxAttempts']);
        // the server fills in the exponential's default factor
        self::assertSame(['type' => 'exponential', 'delay' => 2, 'factor' => 2], $config['backoff']);
        self::assertSame($config, $dq->topic($topic)['config']);
        $job = $dq->add(['topic' => $topic])['job'];
        self::assertSame(30, $job['ttr']);
        self::assertSame(4, $job['maxAttempts']);
        // PUT replaces the whole config: an empty one clears it (sent as {}, not [])
        self::assertSame([], $dq->configureTopic($topic, []));
        self::assertSame(60, $dq->add(['topic' => $topic])['job']['ttr']);
    }

    public function testAPausedTopicHandsOutNothing(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $dq->add(['topic' => $topic, 'id' => self::uid('paused')]);
        self::assertTrue($dq->configureTopic($topic, ['paused' => true])['paused']);
        self::assertSame([], $dq->pop($topic));
        self::assertSame(1, $dq->topic($topic)['counts']['ready']);
        $dq->configureTopic($topic, ['paused' => false]);
        self::assertSame(self::uid('paused'), $dq->pop($topic)[0]['id']);
    }

    public function testHealthAnswersWithoutAToken(): void
    {
        $dq = new \Delayq\Client(self::serviceUrl(), 'not-a-valid-token');
        self::assertSame(['status' => 'ok', 'redis' => 'ok'], $dq->health());
    }
}
