<?php

// The one exception the client throws: a delayq error answer, or a failure that never got one.

declare(strict_types=1);

namespace Delayq;

/**
 * Thrown by every Client method. Catch it, then branch on `errorCode`.
 *
 * `errorCode` is one of the API's codes (`invalid_request`, `unauthorized`, `forbidden`,
 * `not_found`, `job_not_found`, `job_exists`, `job_reserved`, `not_reserved`, `stale_receipt`,
 * `payload_too_large`, `push_topic`, `payment_not_found`, `refund_not_found`, `unknown_account`,
 * `too_many_watches`, `internal_error`,
 * `redis_unavailable`, ...) or one of the client's own for failures without a delayq answer:
 * `network_error` (connection refused or dropped, DNS, TLS), `timeout` (no complete answer within
 * the time limit) and `invalid_response` (an answer that is not delayq's JSON, say a proxy's HTML
 * page). `status` is the HTTP status of the answer, 0 when there was none. `getCode()` returns
 * the status as well.
 */
final class DelayqException extends \RuntimeException
{
    /**
     * @param string $errorCode The API's error code, or the client's own (see above).
     * @param int $status The HTTP status, or 0 when no answer came.
     * @param float|null $retryAfter Seconds the server asked to wait (`Retry-After`), when it said.
     * @param string|null $requestId The answer's `x-request-id`, when delayq answered: quote it to
     *   the operator, whose log line of that id says what a 5xx's message does not.
     */
    public function __construct(
        public readonly string $errorCode,
        string $message,
        public readonly int $status = 0,
        public readonly ?float $retryAfter = null,
        ?\Throwable $previous = null,
        public readonly ?string $requestId = null,
    ) {
        parent::__construct($message, $status, $previous);
    }
}
