<?php

// The base of the suites that talk to the running service: its address and tokens from the
// environment, fresh topic names, and a skip for routes the service does not serve yet.

declare(strict_types=1);

namespace Delayq\Tests\Support;

use Delayq\Client;
use Delayq\DelayqException;
use PHPUnit\Framework\TestCase;

abstract class ServiceTestCase extends TestCase
{
    /** @var array<string, mixed>|null */
    private static ?array $openapi = null;

    /** An environment variable the suite needs; a clear error when it is missing. */
    protected static function env(string $name): string
    {
        $value = getenv($name);
        if (!is_string($value) || $value === '') {
            throw new \RuntimeException(
                "{$name} is not set: run the suite with `npx vitest run test/clients/php.test.ts`, "
                    . 'which starts the service and sets DELAYQ_URL, DELAYQ_TOKEN, '
                    . 'DELAYQ_SCOPED_TOKEN and DELAYQ_SIGNATURE_VECTORS',
            );
        }
        return $value;
    }

    protected static function serviceUrl(): string
    {
        return self::env('DELAYQ_URL');
    }

    /** A client with the admin token; `$baseUrl` points it elsewhere (a fake server). */
    protected static function client(?string $baseUrl = null, int $retries = 3, int $retryDelayMs = 20, int $timeoutMs = 10000, bool $keepAlive = true): Client
    {
        return new Client($baseUrl ?? self::serviceUrl(), self::env('DELAYQ_TOKEN'), retries: $retries, retryDelayMs: $retryDelayMs, timeoutMs: $timeoutMs, keepAlive: $keepAlive);
    }

    /** A client whose token may act only on topics matching `shop.*`. */
    protected static function scopedClient(): Client
    {
        return new Client(self::serviceUrl(), self::env('DELAYQ_SCOPED_TOKEN'));
    }

    /** A topic name no other test uses. */
    protected static function topic(string $prefix = 'php'): string
    {
        return $prefix . '-' . bin2hex(random_bytes(5));
    }

    /** A job id unique to this run of the suite: ids are global across topics. */
    protected static function uid(string $name): string
    {
        static $run = null;
        $run ??= bin2hex(random_bytes(4));
        return "{$name}-{$run}";
    }

    /** Runs `$action`, asserts it throws DelayqException with this code and status, returns it. */
    protected function assertDelayqError(string $code, int $status, callable $action): DelayqException
    {
        try {
            $action();
        } catch (DelayqException $error) {
            self::assertSame(
                [$code, $status],
                [$error->errorCode, $error->status],
                'wrong error: ' . $error->getMessage(),
            );
            return $error;
        }
        self::fail("expected DelayqException {$code} ({$status}), but the call succeeded");
    }

    /** Skips the test, with the reason, while the service does not serve `$method $path`. */
    protected function requireRoute(string $method, string $path): void
    {
        $operation = self::openapi()['paths'][$path][strtolower($method)] ?? null;
        if (!is_array($operation)) {
            self::markTestSkipped("route not served yet: {$method} {$path}");
        }
    }

    /** The service's OpenAPI document, fetched once. */
    protected static function openapi(): array
    {
        if (self::$openapi === null) {
            $handle = curl_init(self::serviceUrl() . '/openapi.json');
            curl_setopt_array($handle, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 10]);
            $text = curl_exec($handle);
            if (!is_string($text) || curl_getinfo($handle, CURLINFO_RESPONSE_CODE) !== 200) {
                throw new \RuntimeException('GET /openapi.json failed: ' . curl_error($handle));
            }
            self::$openapi = json_decode($text, true, 512, JSON_THROW_ON_ERROR);
        }
        return self::$openapi;
    }

    /**
     * Follows `$ref`s within the OpenAPI document.
     *
     * @param array<string, mixed> $schema
     * @return array<string, mixed>
     */
    protected static function resolve(array $schema): array
    {
        for ($hops = 0; isset($schema['$ref']) && $hops < 10; $hops++) {
            $node = self::openapi();
            foreach (explode('/', substr((string) $schema['$ref'], 2)) as $key) {
                $node = $node[$key] ?? [];
            }
            $schema = is_array($node) ? $node : [];
        }
        return $schema;
    }

    /** Sends a raw request to the service (for what the client itself never sends). */
    protected static function rawRequest(string $method, string $path, ?string $body = null): array
    {
        $handle = curl_init(self::serviceUrl() . $path);
        $headers = ['Authorization: Bearer ' . self::env('DELAYQ_TOKEN'), 'Content-Type: application/json', 'Expect:'];
        curl_setopt_array($handle, [
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_HTTPHEADER => $headers,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TIMEOUT => 10,
        ]);
        if ($body !== null) {
            curl_setopt($handle, CURLOPT_POSTFIELDS, $body);
        }
        $text = (string) curl_exec($handle);
        return [(int) curl_getinfo($handle, CURLINFO_RESPONSE_CODE), $text];
    }
}
