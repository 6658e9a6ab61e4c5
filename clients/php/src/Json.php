<?php

// JSON in and out with the client's flags: errors thrown, big integers kept as strings.

declare(strict_types=1);

namespace Delayq;

/** @internal */
final class Json
{
    private function __construct()
    {
    }

    /**
     * Request bodies: slashes and non-ASCII characters as they are, `1.0` kept a float (a
     * fractional `delay` of 2.0 stays a number the server reads as such).
     *
     * @throws DelayqException invalid_request when the value cannot be JSON (invalid UTF-8, NAN,
     *     a resource), before anything is sent.
     */
    public static function encode(mixed $value): string
    {
        try {
            return json_encode(
                $value,
                JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE
                    | JSON_PRESERVE_ZERO_FRACTION,
            );
        } catch (\JsonException $error) {
            throw new DelayqException(
                'invalid_request',
                'The request cannot be sent as JSON: ' . $error->getMessage()
                    . ' (strings must be UTF-8; numbers finite)',
                0,
                null,
                $error,
            );
        }
    }

    /**
     * Answers: objects become associative arrays; integers beyond PHP_INT_MAX become numeric
     * strings (JSON_BIGINT_AS_STRING) instead of losing digits as floats.
     *
     * @throws \JsonException
     */
    public static function decode(string $text): mixed
    {
        return json_decode($text, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
    }
}
