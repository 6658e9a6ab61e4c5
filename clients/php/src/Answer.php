<?php

// One answer delayq gave: its HTTP status and its decoded JSON body (internal to the client).

declare(strict_types=1);

namespace Delayq;

/** @internal */
final class Answer
{
    public function __construct(
        public readonly int $status,
        public readonly mixed $data,
    ) {
    }
}
