<?php

// One HTTP exchange with delayq over ext-curl, with time limits, and the retry loop around it.

declare(strict_types=1);

namespace Delayq;

/**
 * Mirrors the TypeScript client's transport (src/client/transport.ts): 503s, network errors and
 * timeouts are retried with exponential backoff and jitter, waiting at least what `Retry-After`
 * asks (up to `maxRetryDelayMs`); any other status is final.
 *
 * @internal
 */
final class Transport
{
    private const USER_AGENT = 'delayq-php/0.1';

    /**
     * One curl handle for every request, so its connection to delayq is kept alive and reused:
     * a call pays no TCP (or TLS) handshake. curl itself closes a connection whose exchange
     * failed (a timeout, a reset), so a broken one is never tried again.
     */
    private ?\CurlHandle $handle = null;

    public function __construct(
        private readonly string $baseUrl,
        private readonly string $token,
        private readonly int $retries,
        private readonly int $retryDelayMs,
        private readonly int $maxRetryDelayMs,
        private readonly int $timeoutMs,
        private readonly int $connectTimeoutMs,
        private readonly bool $keepAlive,
    ) {
    }

    /** Closes the kept connection, if any; the next request opens a new one. */
    public function close(): void
    {
        $this->handle = null; // curl closes its connections when the handle is freed
    }

    /**
     * Sends a request, retrying as above.
     *
     * @param string $path Already encoded, starting with "/".
     * @param array<string, string|int|null> $query Null values are left out.
     * @param string|null $json The body, already encoded once so every attempt sends the same bytes.
     * @param int $extraTimeoutMs Added to the time limit: a long-poll's `wait`.
     * @param list<int> $answerStatuses Statuses besides 2xx whose JSON body is the answer.
     */
    public function send(
        string $method,
        string $path,
        array $query = [],
        ?string $json = null,
        int $extraTimeoutMs = 0,
        bool $auth = true,
        array $answerStatuses = [],
    ): Answer {
        for ($attempt = 0; ; $attempt++) {
            try {
                [$status, $headers, $text] = $this->exchange(
                    $method,
                    $path,
                    $query,
                    $json,
                    $this->timeoutMs + $extraTimeoutMs,
                    $auth,
                );
                [$parsed, $data] = self::parse($text);
                if (($status >= 200 && $status < 300) || in_array($status, $answerStatuses, true)) {
                    if (!$parsed) {
                        throw new DelayqException(
                            'invalid_response',
                            "delayq answered HTTP {$status} without a JSON body: " . self::excerpt($text),
                            $status,
                        );
                    }
                    return new Answer($status, $data);
                }
                $failure = self::errorOf($status, $headers, $parsed, $data, $text);
            } catch (DelayqException $error) {
                $failure = $error;
            }
            if (!self::retryable($failure) || $attempt >= $this->retries) {
                throw $failure;
            }
            usleep((int) round($this->backoffMs($attempt, $failure->retryAfter) * 1000));
        }
    }

    private static function retryable(DelayqException $error): bool
    {
        return $error->status === 503
            || $error->errorCode === 'network_error'
            || $error->errorCode === 'timeout';
    }

    /** Exponential with "equal jitter": half the step fixed, half random, so clients spread out. */
    private function backoffMs(int $attempt, ?float $retryAfter): float
    {
        $step = $this->retryDelayMs * 2 ** $attempt;
        $jittered = $step / 2 + (mt_rand() / mt_getrandmax()) * $step / 2;
        $asked = $retryAfter === null ? 0.0 : $retryAfter * 1000;
        return min(max($jittered, $asked), (float) $this->maxRetryDelayMs);
    }

    /**
     * One attempt: status, lower-cased response headers and body text.
     *
     * The connection stays open for the next call (HTTP/1.1 keep-alive). curl reads the body by
     * its Content-Length or chunked framing, so a server that keeps the socket open never makes
     * the client wait for EOF, and a connection the server closed while idle is noticed before
     * reuse and replaced. CURLOPT_TIMEOUT_MS bounds the whole exchange, body included.
     *
     * @param array<string, string|int|null> $query
     * @return array{int, array<string, string>, string}
     */
    private function exchange(
        string $method,
        string $path,
        array $query,
        ?string $json,
        int $timeoutMs,
        bool $auth,
    ): array {
        $search = http_build_query(
            array_filter($query, static fn ($value): bool => $value !== null),
            '',
            '&',
            PHP_QUERY_RFC3986,
        );
        $url = $this->baseUrl . $path . ($search === '' ? '' : '?' . $search);
        $headers = [
            'Accept: application/json',
            // Without keep-alive, the server closes the connection after answering.
            ...($this->keepAlive ? [] : ['Connection: close']),
            // curl would otherwise send "Expect: 100-continue" for bodies over 1 KiB and wait.
            'Expect:',
            'User-Agent: ' . self::USER_AGENT,
        ];
        if ($auth) {
            $headers[] = 'Authorization: Bearer ' . $this->token;
        }
        if ($json !== null) {
            $headers[] = 'Content-Type: application/json';
        }
        $received = [];
        $handle = $this->handle;
        if ($handle === null) {
            $handle = curl_init();
            if ($handle === false) {
                throw new DelayqException('network_error', "{$method} {$path}: curl_init failed");
            }
        } else {
            curl_reset($handle); // forgets the last request's options, keeps its connection
        }
        $options = [
            CURLOPT_URL => $url,
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_HTTPHEADER => $headers,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_HTTP_VERSION => CURL_HTTP_VERSION_1_1,
            CURLOPT_TIMEOUT_MS => max(1, $timeoutMs),
            CURLOPT_CONNECTTIMEOUT_MS => max(1, min($this->connectTimeoutMs, $timeoutMs)),
            // Millisecond timeouts with the blocking resolver need signals off.
            CURLOPT_NOSIGNAL => true,
            CURLOPT_FOLLOWLOCATION => false,
            CURLOPT_FORBID_REUSE => !$this->keepAlive,
            CURLOPT_PROTOCOLS => CURLPROTO_HTTP | CURLPROTO_HTTPS,
            CURLOPT_HEADERFUNCTION => static function ($handle, string $line) use (&$received): int {
                if (str_starts_with($line, 'HTTP/')) {
                    $received = []; // a new status line (after a 100 Continue): start over
                } elseif (str_contains($line, ':')) {
                    [$name, $value] = explode(':', $line, 2);
                    $received[strtolower(trim($name))] = trim($value);
                }
                return strlen($line);
            },
        ];
        if ($json !== null) {
            $options[CURLOPT_POSTFIELDS] = $json;
        }
        curl_setopt_array($handle, $options);
        $text = curl_exec($handle);
        $errno = curl_errno($handle);
        $status = (int) curl_getinfo($handle, CURLINFO_RESPONSE_CODE);
        $reason = curl_error($handle);
        $this->handle = $this->keepAlive ? $handle : null;
        if ($errno === CURLE_OPERATION_TIMEDOUT) {
            throw new DelayqException(
                'timeout',
                "{$method} {$path}: no answer from delayq within {$timeoutMs} ms ({$reason})",
            );
        }
        if ($errno !== 0 || !is_string($text)) {
            throw new DelayqException('network_error', "{$method} {$path}: {$reason} (curl error {$errno})");
        }
        /** @var array<string, string> $received */
        return [$status, $received, $text];
    }

    /** @return array{bool, mixed} whether the text is JSON, and its value */
    private static function parse(string $text): array
    {
        if ($text === '') {
            return [false, null];
        }
        try {
            return [true, Json::decode($text)];
        } catch (\JsonException) {
            return [false, null];
        }
    }

    /**
     * The exception an answer that is not a success stands for.
     *
     * @param array<string, string> $headers
     */
    private static function errorOf(int $status, array $headers, bool $parsed, mixed $data, string $text): DelayqException
    {
        $retryAfter = self::parseRetryAfter($headers['retry-after'] ?? null);
        $requestId = $headers['x-request-id'] ?? null;
        $error = $parsed && is_array($data) ? ($data['error'] ?? null) : null;
        if (is_array($error) && is_string($error['code'] ?? null) && is_string($error['message'] ?? null)) {
            return new DelayqException($error['code'], $error['message'], $status, $retryAfter, null, $requestId);
        }
        // The command protocol answers a lone command's failure as a command result:
        // {success: false, error: "<code>: <message>"} (with 503 for redis_unavailable).
        if (is_string($error) && preg_match('/^([a-z_]+): (.*)$/s', $error, $match) === 1) {
            return new DelayqException($match[1], $match[2], $status, $retryAfter, null, $requestId);
        }
        return new DelayqException(
            'invalid_response',
            "HTTP {$status} without a delayq error body: " . self::excerpt($text),
            $status,
            $retryAfter,
            null,
            $requestId,
        );
    }

    /** `Retry-After` in seconds: a number of seconds, or an HTTP date. */
    private static function parseRetryAfter(?string $value): ?float
    {
        if ($value === null || trim($value) === '') {
            return null;
        }
        $value = trim($value);
        if (preg_match('/^\d+(\.\d+)?$/D', $value) === 1) {
            return (float) $value;
        }
        $at = strtotime($value);
        return $at === false ? null : (float) max(0, $at - time());
    }

    private static function excerpt(string $text): string
    {
        if ($text === '') {
            return '(empty)';
        }
        if (strlen($text) <= 200) {
            return $text;
        }
        // Cut before a UTF-8 continuation byte, not inside a character.
        $end = 200;
        while ($end > 0 && (ord($text[$end]) & 0xC0) === 0x80) {
            $end--;
        }
        return substr($text, 0, $end) . '…';
    }
}
