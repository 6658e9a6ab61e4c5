<?php

// Recurring schedules through the client, against the running service: put, get, list, delete,
// fires as jobs due at their times, and the API's errors.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\DelayqException;
use Delayq\Tests\Support\ServiceTestCase;

final class SchedulesTest extends ServiceTestCase
{
    public function testPutScheduleMakesFiresAsJobsDueAtTheirTimes(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $name = $topic . '-s';
        $schedule = $dq->putSchedule($name, [
            'cron' => '*/2 * * * * *',
            'timezone' => 'Asia/Shanghai',
            'topic' => $topic,
            'body' => ['n' => 1],
        ]);
        self::assertSame([$name, 'Asia/Shanghai', false], [$schedule['name'], $schedule['timezone'], $schedule['paused']]);
        self::assertIsInt($schedule['nextRunAt']);
        self::assertSame(0, $schedule['nextRunAt'] % 2000);
        $jobs = $dq->pop($topic, count: 10, wait: 5);
        self::assertNotEmpty($jobs);
        foreach ($jobs as $job) {
            $fire = (int) substr($job['id'], strrpos($job['id'], '@') + 1);
            self::assertSame($name . '@' . $fire, $job['id']);
            self::assertSame($fire, $job['dueAt']);
            self::assertLessThanOrEqual(microtime(true) * 1000 + 1000, $fire);
            self::assertSame(['n' => 1], $job['body']);
        }
        self::assertSame($name, $dq->getSchedule($name)['name']);
        $dq->deleteSchedule($name);
        try {
            $dq->getSchedule($name);
            self::fail('a deleted schedule was read');
        } catch (DelayqException $e) {
            self::assertSame(['schedule_not_found', 404], [$e->errorCode, $e->status]);
        }
    }

    public function testListSchedulesPagesByNameAndPausedMakesNothing(): void
    {
        $dq = self::client();
        $topic = self::topic();
        $names = [$topic . '-a', $topic . '-b'];
        foreach ($names as $name) {
            $paused = $dq->putSchedule($name, ['cron' => '* * * * * *', 'topic' => $topic, 'paused' => true]);
            self::assertNull($paused['nextRunAt']);
        }
        $page = $dq->listSchedules(cursor: $topic . '-', limit: 1);
        self::assertSame([$names[0]], array_column($page['schedules'], 'name'));
        self::assertSame($names[0], $page['cursor'] ?? null);
        self::assertTrue($page['hasMore']);
        $rest = $dq->listSchedules(cursor: $page['cursor'], limit: 1);
        self::assertSame([$names[1]], array_column($rest['schedules'], 'name'));
        self::assertSame([], $dq->pop($topic, count: 10));
        foreach ($names as $name) {
            $dq->deleteSchedule($name);
        }
    }

    public function testABadCronOrTimeZoneIsInvalidRequestNamingIt(): void
    {
        $dq = self::client();
        $topic = self::topic();
        foreach ([['every minute', 'UTC', 'cron'], ['* * * * *', 'Mars/Olympus', 'timezone']] as [$cron, $zone, $field]) {
            try {
                $dq->putSchedule($topic . '-x', ['cron' => $cron, 'timezone' => $zone, 'topic' => $topic]);
                self::fail("$field was taken");
            } catch (DelayqException $e) {
                self::assertSame('invalid_request', $e->errorCode);
                self::assertStringContainsString($field, $e->getMessage());
            }
        }
    }
}
