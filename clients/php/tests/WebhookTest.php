<?php

// Webhook::verify against signatures made by the service's own signWebhook (the vitest wrapper
// writes them to DELAYQ_SIGNATURE_VECTORS), plus tampered, stale and rotated cases.

declare(strict_types=1);

namespace Delayq\Tests;

use Delayq\Tests\Support\ServiceTestCase;
use Delayq\Webhook;

final class WebhookTest extends ServiceTestCase
{
    /**
     * @return array{vectors: list<array{name: string, secret: string, body: string, at: int, header: string}>, fresh: array{secret: string, body: string, header: string}, stale: array{secret: string, body: string, header: string}, rotated: array{oldSecret: string, newSecret: string, body: string, at: int, header: string}}
     */
    private static function vectors(): array
    {
        $path = self::env('DELAYQ_SIGNATURE_VECTORS');
        $data = json_decode((string) file_get_contents($path), true, 512, JSON_THROW_ON_ERROR);
        self::assertNotEmpty($data['vectors'], "no vectors in {$path}");
        return $data;
    }

    public function testTheServicesSignaturesVerify(): void
    {
        $vectors = self::vectors()['vectors'];
        self::assertGreaterThanOrEqual(4, count($vectors));
        foreach ($vectors as $v) {
            $t = intdiv($v['at'], 1000);
            self::assertTrue(Webhook::verify($v['secret'], $v['header'], $v['body'], now: $t), $v['name']);
            // the service's header is exactly the HMAC PHP computes on its own
            $expected = "t={$t},v1=" . hash_hmac('sha256', "{$t}.{$v['body']}", $v['secret']);
            self::assertSame($expected, $v['header'], $v['name']);
        }
    }

    public function testTheToleranceWindowIsInclusive(): void
    {
        foreach (self::vectors()['vectors'] as $v) {
            $t = intdiv($v['at'], 1000);
            self::assertTrue(Webhook::verify($v['secret'], $v['header'], $v['body'], now: $t + 300), $v['name']);
            self::assertTrue(Webhook::verify($v['secret'], $v['header'], $v['body'], now: $t - 300), $v['name']);
            self::assertFalse(Webhook::verify($v['secret'], $v['header'], $v['body'], now: $t + 301), $v['name']);
            self::assertFalse(Webhook::verify($v['secret'], $v['header'], $v['body'], now: $t - 301), $v['name']);
            self::assertTrue(Webhook::verify($v['secret'], $v['header'], $v['body'], 3600, $t + 3600), $v['name']);
            self::assertFalse(Webhook::verify($v['secret'], $v['header'], $v['body'], 10, $t + 11), $v['name']);
        }
    }

    public function testTamperedBodiesSignaturesTimestampsAndSecretsFail(): void
    {
        foreach (self::vectors()['vectors'] as $v) {
            $t = intdiv($v['at'], 1000);
            $ok = static fn (string $secret, string $header, string $body): bool
                => Webhook::verify($secret, $header, $body, now: $t);
            self::assertFalse($ok($v['secret'], $v['header'], $v['body'] . ' '), "{$v['name']}: body + space");
            self::assertFalse($ok($v['secret'], $v['header'], 'x' . $v['body']), "{$v['name']}: prefixed body");
            self::assertFalse($ok($v['secret'] . 'x', $v['header'], $v['body']), "{$v['name']}: other secret");
            $mac = substr($v['header'], strpos($v['header'], 'v1=') + 3);
            $flipped = substr($mac, 0, -1) . ($mac[-1] === '0' ? '1' : '0');
            self::assertFalse($ok($v['secret'], "t={$t},v1={$flipped}", $v['body']), "{$v['name']}: flipped hex");
            self::assertFalse($ok($v['secret'], "t={$t},v1=" . substr($mac, 0, 32), $v['body']), "{$v['name']}: truncated");
            // moving the timestamp breaks the signature, which covers it
            self::assertFalse(Webhook::verify($v['secret'], 't=' . ($t + 1) . ",v1={$mac}", $v['body'], now: $t + 1), $v['name']);
            // case of the hex and spaces around entries do not matter
            self::assertTrue($ok($v['secret'], ' t=' . $t . ' , v1=' . strtoupper($mac), $v['body']), $v['name']);
        }
    }

    public function testMissingAndMalformedHeadersFail(): void
    {
        $v = self::vectors()['vectors'][0];
        $t = intdiv($v['at'], 1000);
        $mac = substr($v['header'], strpos($v['header'], 'v1=') + 3);
        foreach ([null, '', 'garbage', "t={$t}", "v1={$mac}", "t=,v1={$mac}", "t=abc,v1={$mac}",
            "t={$t},v0={$mac}", "t={$t};v1={$mac}", "t=-{$t},v1={$mac}", "t={$t}0000000000,v1={$mac}"] as $header) {
            self::assertFalse(Webhook::verify($v['secret'], $header, $v['body'], now: $t), var_export($header, true));
        }
        self::assertFalse(Webhook::verify('', $v['header'], $v['body'], now: $t), 'an empty secret never verifies');
    }

    public function testNowDefaultsToTheClock(): void
    {
        $data = self::vectors();
        $fresh = $data['fresh'];
        self::assertTrue(Webhook::verify($fresh['secret'], $fresh['header'], $fresh['body']));
        $stale = $data['stale'];
        self::assertFalse(Webhook::verify($stale['secret'], $stale['header'], $stale['body']), 'signed an hour ago');
        self::assertTrue(Webhook::verify($stale['secret'], $stale['header'], $stale['body'], 7200));
    }

    public function testEitherSecretVerifiesWhileOneRotates(): void
    {
        $r = self::vectors()['rotated'];
        $t = intdiv($r['at'], 1000);
        self::assertSame(2, substr_count($r['header'], 'v1='));
        self::assertTrue(Webhook::verify($r['oldSecret'], $r['header'], $r['body'], now: $t));
        self::assertTrue(Webhook::verify($r['newSecret'], $r['header'], $r['body'], now: $t));
        self::assertFalse(Webhook::verify('a-third-secret-entirely', $r['header'], $r['body'], now: $t));
        self::assertFalse(Webhook::verify($r['newSecret'], $r['header'], $r['body'] . "\n", now: $t));
    }

    public function testTheHeaderNameAndDefaultTolerance(): void
    {
        self::assertSame('delayq-signature', Webhook::HEADER);
        self::assertSame(300, Webhook::DEFAULT_TOLERANCE);
    }
}
