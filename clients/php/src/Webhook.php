<?php

// Verifies the delayq-signature header on push deliveries and failure notices (DESIGN §3).

declare(strict_types=1);

namespace Delayq;

/**
 * delayq signs every push delivery:
 *
 *     delayq-signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
 *
 * The timestamp is signed with the body, so a captured delivery cannot be replayed once the
 * tolerance has passed; several `v1` entries may come while a secret rotates, and any may match.
 *
 * ```php
 * $ok = Delayq\Webhook::verify($secret, $_SERVER['HTTP_DELAYQ_SIGNATURE'] ?? null,
 *     file_get_contents('php://input'));
 * ```
 */
final class Webhook
{
    /** The header's name (PHP's `$_SERVER` key for it is `HTTP_DELAYQ_SIGNATURE`). */
    public const HEADER = 'delayq-signature';

    /** Seconds a signature's timestamp may be away from now, either side. */
    public const DEFAULT_TOLERANCE = 300;

    private function __construct()
    {
    }

    /**
     * Whether `$header` signs `$rawBody` with `$secret` and its timestamp is within `$tolerance`
     * seconds of `$now`. Pass the body exactly as received, before any JSON decoding: re-encoding
     * changes bytes. Compares in constant time (hash_equals); a missing or malformed header is
     * simply false.
     *
     * @param string $secret The topic's push secret.
     * @param string|null $header The `delayq-signature` header's value, null when absent.
     * @param string $rawBody The request body as received.
     * @param int $tolerance Seconds the timestamp may be off, either side.
     * @param int|null $now Now, in unix SECONDS (time()); for tests.
     */
    public static function verify(
        string $secret,
        ?string $header,
        string $rawBody,
        int $tolerance = self::DEFAULT_TOLERANCE,
        ?int $now = null,
    ): bool {
        if ($header === null || $header === '' || $secret === '') {
            return false;
        }
        $t = null;
        $candidates = [];
        foreach (explode(',', $header) as $part) {
            $pair = explode('=', trim($part), 2);
            if (count($pair) !== 2 || $pair[1] === '') {
                continue;
            }
            [$name, $value] = $pair;
            if ($name === 't' && preg_match('/^\d{1,12}$/D', $value) === 1) {
                $t = (int) $value;
            } elseif ($name === 'v1') {
                $candidates[] = strtolower($value);
            }
        }
        if ($t === null || $candidates === []) {
            return false;
        }
        if (abs(($now ?? time()) - $t) > $tolerance) {
            return false;
        }
        $expected = hash_hmac('sha256', $t . '.' . $rawBody, $secret);
        $ok = false;
        // Every candidate is compared, so the time taken says nothing about which one matched.
        foreach ($candidates as $candidate) {
            if (hash_equals($expected, $candidate)) {
                $ok = true;
            }
        }
        return $ok;
    }
}
