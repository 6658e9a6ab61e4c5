<?php

// Delayq\Client: one method per route of delayq's HTTP API, with retries like the TS client.

declare(strict_types=1);

namespace Delayq;

/**
 * The delayq API. Every method throws {@see DelayqException} on failure. Results are the API's
 * JSON as associative arrays, with the API's field names; see the shapes below.
 *
 * JSON notes: objects come back as associative arrays (an empty object `{}` as `[]`), and
 * integers beyond PHP_INT_MAX as numeric strings (JSON_BIGINT_AS_STRING) rather than lossy
 * floats. To send an empty JSON object as a job body, pass `new \stdClass()`.
 *
 * Retrying is safe for each call: an add (`add`, `addBatch`, a `command` add) without an id gets a
 * random UUID v4 before the first attempt, so a retry of an add that did land answers
 * `created: false` with that job instead of adding a twin; `finish`, `finishMany` and `delete` are
 * idempotent on the server; a retried `release` or `bury` whose first attempt landed answers
 * `not_reserved`; a `pop` whose answer was lost gives its jobs back when their TTR runs out.
 *
 * @phpstan-type Backoff int|float|'wechatpay'|'alipay'|'youzan'|'wechatpay-native'|'alipay-f2f'|'refund'|list<int|float>|array{type: 'exponential', delay: int|float, factor?: int|float, max?: int|float}
 * @phpstan-type Job array{id: string, topic: string, state: 'delayed'|'ready'|'reserved'|'finished'|'dead'|'deleted', body: mixed, dueAt: int, ttr: int, attempts: int, maxAttempts: int, createdAt: int, backoff?: Backoff, deadline?: int, reservedUntil?: int, receipt?: string, endedAt?: int, deadReason?: 'attempts'|'deadline'|'buried', lastError?: array{message: string, at: int, attempt: int}}
 * @phpstan-type AddJob array{topic: string, id?: string, body?: mixed, delay?: int|float, runAt?: int|string, ttr?: int, maxAttempts?: int, backoff?: Backoff, deadline?: int|string, replace?: bool}
 * @phpstan-type AddResult array{created: bool, job: Job}
 * @phpstan-type BatchItemResult array{created: bool, job: Job}|array{error: array{code: string, message: string}}
 * @phpstan-type FinishJob array{id: string, receipt?: string|null}
 * @phpstan-type FinishItemResult array{finished: true}|array{error: array{code: string, message: string}}
 * @phpstan-type PushConfig array{url: string, via?: 'direct'|'qstash', secret?: string, timeout?: int, failureUrl?: string, headers?: array<string, string>, rate?: int, parallelism?: int}
 * @phpstan-type TopicConfig array{ttr?: int, maxAttempts?: int, backoff?: Backoff, paused?: bool, push?: PushConfig|null}
 * @phpstan-type TopicStats array{topic: string, counts: array{delayed: int, ready: int, reserved: int, dead: int}, oldestDueAt?: int, config: TopicConfig, push?: array{delivered: int, failed: int}, heldBack?: int, heldBackSince?: int}
 * @phpstan-type TopicPage array{topics: list<TopicStats>, cursor?: string, hasMore: bool}
 * @phpstan-type JobPage array{jobs: list<Job>, cursor?: string, hasMore: bool}
 * @phpstan-type Command array{command: 'add'|'pop'|'finish'|'delete'|'get'|'touch'|'release'|'bury'|'reschedule'|'promote', topic?: string, id?: string, receipt?: string, delay?: int|float, runAt?: int|string, TTR?: int, ttr?: int, body?: mixed, wait?: int|float, maxAttempts?: int, backoff?: Backoff, deadline?: int|string, replace?: bool, error?: string}
 * @phpstan-type CommandResult array{success: bool, error: string, id?: string, value?: mixed, receipt?: string}
 * @phpstan-type Health array{status: 'ok'|'degraded', redis: 'ok'|'unreachable', message?: string}
 * @phpstan-type PaymentWatch array{provider: 'alipay'|'wechatpay', account: string, outTradeNo: string, notify: list<string>, schedule?: Backoff, deadline?: int|string, closeOnDeadline?: bool, amount?: array{total: int, currency?: string}, metadata?: mixed}
 * @phpstan-type Payment array{provider: 'alipay'|'wechatpay', account: string, outTradeNo: string, state: 'polling'|'paid'|'closed'|'failed'|'expired'|'stopped'|'mismatch', polls: int, nextPollAt?: int, lastAnswer?: array{tradeState: string, at: int}, outcome?: array<string, mixed>, amount?: array{total: int, currency: string}, createdAt: int, deadline: int, notify: list<string>, metadata?: mixed}
 * @phpstan-type WatchResult array{created: bool, payment: Payment}
 * @phpstan-type RefundWatch array{provider: 'alipay'|'wechatpay', account: string, outRefundNo: string, outTradeNo?: string, notify: list<string>, schedule?: Backoff, deadline?: int|string, metadata?: mixed}
 * @phpstan-type Refund array{provider: 'alipay'|'wechatpay', account: string, outRefundNo: string, outTradeNo?: string, state: 'polling'|'succeeded'|'closed'|'abnormal'|'expired'|'stopped', polls: int, nextPollAt?: int, lastAnswer?: array{status: string, at: int}, outcome?: array<string, mixed>, firstOutcome?: array<string, mixed>, createdAt: int, deadline: int, notify: list<string>, metadata?: mixed}
 * @phpstan-type WatchRefundResult array{created: bool, refund: Refund}
 * @phpstan-type ScheduleInput array{cron: string, topic: string, timezone?: string, body?: mixed, ttr?: int, maxAttempts?: int, paused?: bool}
 * @phpstan-type Schedule array{name: string, cron: string, timezone: string, topic: string, body: mixed, ttr?: int, maxAttempts?: int, paused: bool, nextRunAt: int|null, lastRunAt?: int, createdAt: int}
 * @phpstan-type SchedulePage array{schedules: list<Schedule>, cursor?: string, hasMore: bool}
 */
final class Client
{
    private readonly Transport $transport;

    /**
     * @param string $baseUrl Where delayq is served, without `/v1`: e.g. `http://127.0.0.1:8787`.
     * @param string $token A bearer token from the server's `DQ_TOKENS`.
     * @param int $retries Retries after a 503, a network error or a timeout; never after any other
     *     status. 0 turns retrying off.
     * @param int $retryDelayMs The first retry's wait; it doubles on each retry, with jitter, and
     *     is at least what the server's `Retry-After` asks.
     * @param int $maxRetryDelayMs The longest wait between two attempts, whatever `Retry-After` says.
     * @param int $timeoutMs Time limit of each attempt, from connecting to the whole body read. A
     *     long-polling `pop` (and a `command` that pops with `wait`) gets its `wait` on top.
     * @param int $connectTimeoutMs Time limit for the TCP (and TLS) connection, within `$timeoutMs`.
     * @param bool $keepAlive Keep the connection open between calls and reuse it (the default),
     *     so a call pays no TCP or TLS handshake. False sends `Connection: close` and connects
     *     anew for every call: for a process that forks while a client is open.
     */
    public function __construct(
        string $baseUrl,
        string $token,
        int $retries = 3,
        int $retryDelayMs = 200,
        int $maxRetryDelayMs = 5000,
        int $timeoutMs = 30000,
        int $connectTimeoutMs = 10000,
        bool $keepAlive = true,
    ) {
        if (preg_match('#^https?://[^/?\#]+#i', $baseUrl) !== 1) {
            throw new \InvalidArgumentException(
                'delayq client: baseUrl must be an http(s) URL, e.g. http://127.0.0.1:8787',
            );
        }
        if ($token === '') {
            throw new \InvalidArgumentException('delayq client: token is required');
        }
        $limits = compact('retries', 'retryDelayMs', 'maxRetryDelayMs', 'timeoutMs', 'connectTimeoutMs');
        foreach ($limits as $name => $value) {
            if ($value < 0) {
                throw new \InvalidArgumentException("delayq client: {$name} must be ≥ 0");
            }
        }
        $this->transport = new Transport(
            rtrim($baseUrl, '/'),
            $token,
            $retries,
            $retryDelayMs,
            $maxRetryDelayMs,
            $timeoutMs,
            $connectTimeoutMs,
            $keepAlive,
        );
    }

    /**
     * Closes the connection kept open for the next call, if any. The client stays usable: its next
     * call connects again. (The connection also closes when the client is destroyed.)
     */
    public function close(): void
    {
        $this->transport->close();
    }

    /**
     * Adds a job (`POST /v1/jobs`). Without `id` (or with a null one) the client makes one, a UUID
     * v4, so that retries cannot add it twice. `created` is false when a job with that id already
     * existed in the topic: the stored job is returned unchanged.
     *
     * @param AddJob $job e.g. `['topic' => 'payments', 'delay' => 30, 'body' => ['order' => 1042]]`
     * @return AddResult
     */
    public function add(array $job): array
    {
        $answer = $this->call('POST', '/v1/jobs', body: self::withId($job));
        self::expect($answer, 'created', 'bool');
        self::expect($answer, 'job', 'array');
        /** @var AddResult */
        return $answer->data;
    }

    /**
     * Adds up to 1000 jobs in one request (`POST /v1/jobs/batch`). Each item is validated and
     * added on its own: one result per item, in order, `['created', 'job']` or `['error']`. Items
     * without an id get one, as in `add`.
     *
     * @param list<AddJob> $jobs
     * @return list<BatchItemResult>
     */
    public function addBatch(array $jobs): array
    {
        $answer = $this->call(
            'POST',
            '/v1/jobs/batch',
            body: ['jobs' => array_map(self::withId(...), array_values($jobs))],
        );
        /** @var list<BatchItemResult> */
        return self::expect($answer, 'results', 'list');
    }

    /**
     * The job and its current state (`GET /v1/jobs/{id}`).
     *
     * @return Job
     */
    public function get(string $id): array
    {
        $answer = $this->call('GET', '/v1/jobs/' . self::segment($id, 'job id'));
        /** @var Job */
        return self::expect($answer, 'job', 'array');
    }

    /** Deletes a job in any state (`DELETE /v1/jobs/{id}`); deleting it again succeeds. */
    public function delete(string $id): void
    {
        $answer = $this->call('DELETE', '/v1/jobs/' . self::segment($id, 'job id'));
        self::expect($answer, 'deleted', 'bool');
    }

    /**
     * Reserves up to `$count` (1-100, default 1) ready jobs of a topic
     * (`POST /v1/topics/{topic}/pop`), each with a `receipt` and leased for its TTR. With `$wait`
     * (seconds, up to 20) it long-polls for a job; `[]` when none came.
     *
     * @return list<Job>
     */
    public function pop(string $topic, ?int $count = null, int|float|null $wait = null): array
    {
        $answer = $this->call(
            'POST',
            '/v1/topics/' . self::segment($topic, 'topic') . '/pop',
            body: self::fields(['count' => $count, 'wait' => $wait]),
            // The server holds the request open for `wait`: that time is not a timeout.
            extraTimeoutMs: self::waitMs($wait),
        );
        /** @var list<Job> */
        return self::expect($answer, 'jobs', 'list');
    }

    /**
     * Finishes a reserved job (`POST /v1/jobs/{id}/finish`). With `$receipt`, only that
     * reservation may finish it (else `stale_receipt`); finishing a finished job again succeeds.
     */
    public function finish(string $id, ?string $receipt = null): void
    {
        self::expect($this->verb($id, 'finish', ['receipt' => $receipt]), 'finished', 'bool');
    }

    /**
     * Finishes up to 100 reserved jobs in one request (`POST /v1/jobs/finish`): pass what `pop`
     * gave (only each job's `id` and `receipt` are sent), or `['id' => ..., 'receipt' => ...]`
     * arrays (sent as they are, as is a job read with `get`, so the server refuses a misspelt
     * field). One result per job, in order, `['finished' => true]` or `['error' => ['code',
     * 'message']]`; a refused job leaves the others finished. An empty list (a pop that found
     * nothing) sends nothing and answers [].
     *
     * @param list<Job|FinishJob> $jobs
     * @return list<FinishItemResult>
     */
    public function finishMany(array $jobs): array
    {
        if ($jobs === []) {
            return []; // what a pop that found nothing gave: nothing to send
        }
        $answer = $this->call('POST', '/v1/jobs/finish', body: ['jobs' => self::finishItems($jobs)]);
        /** @var list<FinishItemResult> */
        return self::expect($answer, 'results', 'list');
    }

    /**
     * Finishes what the last pop gave and pops the next, in one request and one script call
     * (`POST /v1/topics/{topic}/pop` with `finish`), as BullMQ's worker and JetStream's AckNext
     * do. Answers `['jobs' => [...], 'finished' => [...]]`: the jobs reserved, and one result
     * per job given, as `finishMany` answers. The jobs are finished before the pop takes any and
     * stay finished whatever it does; with `$wait`, the answer comes when the wait ends.
     *
     * @param list<Job|FinishJob> $jobs
     * @return array{jobs: list<Job>, finished: list<FinishItemResult>}
     */
    public function finishAndPop(
        string $topic,
        array $jobs,
        ?int $count = null,
        int|float|null $wait = null,
    ): array {
        $answer = $this->call(
            'POST',
            '/v1/topics/' . self::segment($topic, 'topic') . '/pop',
            body: self::fields(['count' => $count, 'wait' => $wait, 'finish' => self::finishItems($jobs)]),
            extraTimeoutMs: self::waitMs($wait),
        );
        /** @var list<FinishItemResult> */
        $finished = self::expect($answer, 'finished', 'list');
        /** @var list<Job> */
        $popped = self::expect($answer, 'jobs', 'list');
        return ['jobs' => $popped, 'finished' => $finished];
    }

    /**
     * Runs `$handler($job, $touch)` for each job of `$topic` until `$shouldStop()` answers true
     * (asked before each pop), like Laravel's and BullMQ's workers; blocks until then. Each pop
     * takes `$count` jobs and runs them one after the other, and finishes the jobs the handler
     * ran in the pop that takes the next ones (`finishAndPop`: one request a job), without a
     * wait while it holds some and long-polling `$wait` seconds when it holds none (a stop takes
     * effect when that long-poll ends). A handler that throws has its job released, to run again
     * after the topic's backoff step or to die out of attempts. PHP runs nothing beside the
     * handler: one that may outlast its job's TTR calls `$touch()` now and then, which extends
     * the lease (and throws `DelayqException` when it is lost). What is not thrown (a handler's
     * exception, a refused finish, a failed call, retried after `$retryDelay` seconds) goes to
     * `$onError($error, $job)`. Returns once the jobs the handler ran are finished; throws
     * `DelayqException` when delayq refuses a pop (a 4xx: a token without the topic, a push
     * topic), since asking again would not help.
     *
     * @param callable(Job, callable(): Job): mixed $handler
     * @param (callable(): bool)|null $shouldStop
     * @param (callable(\Throwable, Job|null): mixed)|null $onError
     */
    public function work(
        string $topic,
        callable $handler,
        int $count = 1,
        int|float $wait = 20,
        ?callable $shouldStop = null,
        ?callable $onError = null,
        int|float $retryDelay = 1,
    ): void {
        if ($count < 1 || $count > 100) {
            throw new \InvalidArgumentException("count: give a whole number of jobs from 1 to 100, not {$count}");
        }
        if ($wait < 0 || $wait > 20) {
            throw new \InvalidArgumentException("wait: give 0 to 20 seconds, not {$wait}");
        }
        $report = static function (\Throwable $error, ?array $job = null) use ($onError): void {
            if ($onError !== null) {
                $onError($error, $job);
            }
        };
        $reportRefused = static function (array $results, array $jobs) use ($report): void {
            foreach ($results as $i => $result) {
                if (isset($result['error'])) {
                    $report(new DelayqException($result['error']['code'], $result['error']['message']), $jobs[$i] ?? null);
                }
            }
        };
        /** @var list<Job> $held */
        $held = [];
        while ($shouldStop === null || !$shouldStop()) {
            try {
                $answer = $this->finishAndPop($topic, $held, $count, $held === [] ? $wait : 0);
            } catch (DelayqException $error) {
                if ($error->status >= 400 && $error->status < 500) {
                    throw $error; // the pop itself was refused: asking again will not help
                }
                // The finishes are tried again with the next pop: finishing twice answers the same.
                $report($error);
                usleep((int) ($retryDelay * 1_000_000));
                continue;
            }
            $reportRefused($answer['finished'], $held);
            $held = [];
            foreach ($answer['jobs'] as $job) {
                $touch = fn (): array => $this->touch($job['id'], $job['receipt'] ?? null);
                try {
                    $handler($job, $touch);
                    $held[] = $job;
                } catch (\Throwable $error) {
                    $report($error, $job);
                    try {
                        $this->release($job['id'], $job['receipt'] ?? null, null, self::failureText($error));
                    } catch (DelayqException $failed) {
                        $report($failed, $job);
                    }
                }
            }
        }
        if ($held !== []) {
            try {
                $reportRefused($this->finishMany($held), $held);
            } catch (DelayqException $error) {
                $report($error);
            }
        }
    }

    /**
     * Jobs to finish as the server takes them. A job as pop answered it (with its state and
     * receipt) goes as its id and receipt. Any other item goes as it is (a null field left
     * out), a job read with get too, so that the server refuses a misspelt field ('reciept')
     * instead of finishing the job for whoever holds it.
     *
     * @param list<Job|FinishJob> $jobs
     * @return list<array<string, mixed>>
     */
    private static function finishItems(array $jobs): array
    {
        $items = [];
        foreach ($jobs as $job) {
            $items[] = isset($job['state']) && is_string($job['receipt'] ?? null)
                ? ['id' => $job['id'] ?? null, 'receipt' => $job['receipt']]
                : self::fields($job);
        }
        return $items;
    }

    /**
     * Extends a reservation by the job's TTR from now (`POST /v1/jobs/{id}/touch`).
     *
     * @return Job
     */
    public function touch(string $id, ?string $receipt = null): array
    {
        /** @var Job */
        return self::expect($this->verb($id, 'touch', ['receipt' => $receipt]), 'job', 'array');
    }

    /**
     * Gives a reserved job back (`POST /v1/jobs/{id}/release`), to run again after `$delay`
     * seconds, or after its backoff step when no delay is given (or to die, out of attempts).
     * `$error` (up to 1 KiB): why the attempt failed, which the job then shows as `lastError`.
     *
     * @return Job
     */
    public function release(
        string $id,
        ?string $receipt = null,
        int|float|null $delay = null,
        ?string $error = null,
    ): array {
        $answer = $this->verb($id, 'release', ['receipt' => $receipt, 'delay' => $delay, 'error' => $error]);
        /** @var Job */
        return self::expect($answer, 'job', 'array');
    }

    /**
     * Moves a reserved job to its topic's dead letter (`POST /v1/jobs/{id}/bury`); `$error` as
     * for `release`.
     *
     * @return Job
     */
    public function bury(string $id, ?string $receipt = null, ?string $error = null): array
    {
        $answer = $this->verb($id, 'bury', ['receipt' => $receipt, 'error' => $error]);
        /** @var Job */
        return self::expect($answer, 'job', 'array');
    }

    /**
     * Gives a delayed or ready job a new due time (`POST /v1/jobs/{id}/reschedule`): `$delay`
     * seconds from now or `$runAt` (unix ms or ISO-8601; a time past means due now), one of
     * them. Any other state throws `DelayqException` `invalid_state` (409).
     *
     * @return Job
     */
    public function reschedule(string $id, int|float|null $delay = null, int|string|null $runAt = null): array
    {
        $answer = $this->verb($id, 'reschedule', ['delay' => $delay, 'runAt' => $runAt]);
        /** @var Job */
        return self::expect($answer, 'job', 'array');
    }

    /**
     * Makes a delayed job ready now (`POST /v1/jobs/{id}/promote`); any other state throws
     * `DelayqException` `invalid_state` (409).
     *
     * @return Job
     */
    public function promote(string $id): array
    {
        /** @var Job */
        return self::expect($this->verb($id, 'promote', []), 'job', 'array');
    }

    /**
     * Moves dead jobs back to ready with attempts reset (`POST /v1/topics/{topic}/kick`): the
     * given `$ids`, or the `$count` oldest (up to 1000 when neither is given; not both). Returns
     * how many moved.
     *
     * @param list<string>|null $ids
     */
    public function kick(string $topic, ?array $ids = null, ?int $count = null): int
    {
        $answer = $this->call(
            'POST',
            '/v1/topics/' . self::segment($topic, 'topic') . '/kick',
            body: self::fields(['ids' => $ids === null ? null : array_values($ids), 'count' => $count]),
        );
        /** @var int */
        return self::expect($answer, 'kicked', 'int');
    }

    /**
     * Deletes a topic's `$count` oldest dead jobs (`DELETE /v1/topics/{topic}/dead`; default and
     * most 1000). Returns how many.
     */
    public function deleteDead(string $topic, ?int $count = null): int
    {
        $answer = $this->call(
            'DELETE',
            '/v1/topics/' . self::segment($topic, 'topic') . '/dead',
            query: ['count' => $count],
        );
        /** @var int */
        return self::expect($answer, 'deleted', 'int');
    }

    /**
     * A page of topics by name with their stats (`GET /v1/topics`); only the topics the token
     * may act on. Pass `cursor` back as `$cursor` for the next page, while `hasMore`. A token not
     * limited to topics may also give a name (the topics after it). `$after` is `$cursor`'s
     * former name, still accepted.
     *
     * @return TopicPage
     */
    public function topics(?string $cursor = null, ?int $limit = null, ?string $after = null): array
    {
        $answer = $this->call('GET', '/v1/topics', query: ['cursor' => $cursor ?? $after, 'limit' => $limit]);
        self::expect($answer, 'topics', 'list');
        /** @var TopicPage */
        return self::withHasMore($answer->data);
    }

    /**
     * A topic's counts per state, earliest due time and config (`GET /v1/topics/{topic}`).
     *
     * @return TopicStats
     */
    public function topic(string $topic): array
    {
        $answer = $this->call('GET', '/v1/topics/' . self::segment($topic, 'topic'));
        self::expect($answer, 'counts', 'array');
        /** @var TopicStats */
        return $answer->data;
    }

    /**
     * A page of a topic's jobs in one state: `delayed`, `ready`, `reserved` or `dead`
     * (`GET /v1/topics/{topic}/jobs`). Pass `cursor` back for the next page, while `hasMore`.
     *
     * @param 'delayed'|'ready'|'reserved'|'dead' $state
     * @return JobPage
     */
    public function listJobs(string $topic, string $state, ?string $cursor = null, ?int $limit = null): array
    {
        $answer = $this->call(
            'GET',
            '/v1/topics/' . self::segment($topic, 'topic') . '/jobs',
            query: ['state' => $state, 'cursor' => $cursor, 'limit' => $limit],
        );
        self::expect($answer, 'jobs', 'list');
        /** @var JobPage */
        return self::withHasMore($answer->data);
    }

    /**
     * Replaces a topic's whole config (`PUT /v1/topics/{topic}`): job defaults (`ttr`,
     * `maxAttempts`, `backoff`) for jobs added afterwards, `paused`, and `push` (a webhook, or
     * null for a pulled topic). Returns the config as stored, defaults filled in and a push
     * secret masked (shown in full only the first time the server generates it).
     *
     * @param TopicConfig $config
     * @return TopicConfig
     */
    public function configureTopic(string $topic, array $config): array
    {
        $answer = $this->call('PUT', '/v1/topics/' . self::segment($topic, 'topic'), body: self::object($config));
        /** @var TopicConfig */
        return self::expect($answer, 'config', 'array');
    }

    /**
     * Changes part of a topic's config (`PATCH /v1/topics/{topic}`): the fields given are
     * changed, the others kept, and a field set to null is removed (`['push' => null]` makes
     * the topic pulled again). Returns the whole config as stored.
     *
     * @param array{ttr?: int|null, maxAttempts?: int|null, backoff?: Backoff|null, paused?: bool|null, push?: PushConfig|null} $changes
     * @return TopicConfig
     */
    public function updateTopic(string $topic, array $changes): array
    {
        $answer = $this->call('PATCH', '/v1/topics/' . self::segment($topic, 'topic'), body: self::object($changes));
        /** @var TopicConfig */
        return self::expect($answer, 'config', 'array');
    }

    /**
     * Runs one command of the command protocol (`POST /v1/command`) — an array with a `command`
     * key — or a list of up to 1000, run in order. A command that fails answers
     * `['success' => false, 'error' => '<code>: <message>']` rather than throwing; the call
     * throws only when the request as a whole fails (for a lone command, that includes
     * `redis_unavailable`). `add` commands without an id get one, as in `add`.
     *
     * @param Command|list<Command> $command
     * @return ($command is list<Command> ? list<CommandResult> : CommandResult)
     */
    public function command(array $command): array
    {
        $many = array_is_list($command);
        /** @var list<array<string, mixed>> $list */
        $list = $many ? $command : [$command];
        $waitMs = 0;
        foreach ($list as $index => $one) {
            if (!is_array($one) || !is_string($one['command'] ?? null)) {
                throw new DelayqException(
                    'invalid_request',
                    'A command is an array with a "command" key, e.g. [\'command\' => \'pop\', \'topic\' => \'t\']'
                        . ($many ? " (item {$index})" : ''),
                );
            }
            if ($one['command'] === 'add') {
                $list[$index] = self::withId($one);
            } elseif ($one['command'] === 'pop') {
                // Commands run one after another, so each pop's wait adds up.
                $wait = $one['wait'] ?? null;
                $waitMs += self::waitMs(is_int($wait) || is_float($wait) ? $wait : null);
            }
        }
        $answer = $this->call(
            'POST',
            '/v1/command',
            body: $many ? $list : self::object($list[0]),
            extraTimeoutMs: $waitMs,
        );
        $data = $answer->data;
        if (!is_array($data) || $many !== array_is_list($data)) {
            throw self::invalidResponse($answer, $many ? 'a list of results' : 'a command result');
        }
        /** @var CommandResult|list<CommandResult> */
        return $data;
    }

    /**
     * Whether delayq is up and reaches Redis (`GET /health`, no token sent). Answers the body for
     * a 503 too (`status: "degraded"`) rather than throwing: it is the answer asked for.
     *
     * @return Health
     */
    public function health(): array
    {
        $answer = $this->call('GET', '/health', auth: false, answerStatuses: [503]);
        self::expect($answer, 'status', 'string');
        /** @var Health */
        return $answer->data;
    }

    /**
     * Starts watching one order at Alipay or WeChat Pay (`POST /v1/payments`): delayq polls the
     * provider until the order is paid, closed or failed, or its deadline passes, and adds the
     * outcome as a job to each `notify` topic. Idempotent by (provider, account, outTradeNo):
     * `created` is false when the watch existed.
     *
     * @param PaymentWatch $watch e.g. `['provider' => 'alipay', 'account' => 'shop',
     *     'outTradeNo' => 'order-1042', 'notify' => ['payment-results']]`, plus `schedule`,
     *     `deadline`, `closeOnDeadline` and `metadata` when wanted.
     * @return WatchResult
     */
    public function watchPayment(array $watch): array
    {
        $answer = $this->call('POST', '/v1/payments', body: self::object($watch));
        self::expect($answer, 'created', 'bool');
        self::expect($answer, 'payment', 'array');
        /** @var WatchResult */
        return $answer->data;
    }

    /**
     * A payment watch and its state (`GET /v1/payments/{provider}/{account}/{outTradeNo}`).
     *
     * @param 'alipay'|'wechatpay' $provider
     * @return Payment
     */
    public function getPayment(string $provider, string $account, string $outTradeNo): array
    {
        $answer = $this->call('GET', self::paymentPath($provider, $account, $outTradeNo));
        /** @var Payment */
        return self::expect($answer, 'payment', 'array');
    }

    /**
     * Stops a payment watch (`DELETE /v1/payments/{provider}/{account}/{outTradeNo}`); it then
     * reads `stopped` while it is retained.
     *
     * @param 'alipay'|'wechatpay' $provider
     */
    public function stopPayment(string $provider, string $account, string $outTradeNo): void
    {
        $answer = $this->call('DELETE', self::paymentPath($provider, $account, $outTradeNo));
        self::expect($answer, 'deleted', 'bool');
    }

    /**
     * Starts watching one refund at Alipay or WeChat Pay (`POST /v1/refunds`): delayq queries the
     * provider (default: the `refund` preset, 1 min, 5, 10, 20, 30 min) until the refund
     * succeeds, closes or goes abnormal, or its deadline (default 7 days) passes, and adds the
     * outcome (`refund.succeeded`, ...) as a job to each `notify` topic. Idempotent by (provider,
     * account, outRefundNo): `created` is false when the watch existed.
     *
     * @param RefundWatch $watch e.g. `['provider' => 'alipay', 'account' => 'shop',
     *     'outRefundNo' => 'refund-1042-1', 'outTradeNo' => 'order-1042', 'notify' =>
     *     ['refund-results']]` (`outTradeNo` required for Alipay), plus `schedule`, `deadline`
     *     and `metadata` when wanted.
     * @return WatchRefundResult
     */
    public function watchRefund(array $watch): array
    {
        $answer = $this->call('POST', '/v1/refunds', body: self::object($watch));
        self::expect($answer, 'created', 'bool');
        self::expect($answer, 'refund', 'array');
        /** @var WatchRefundResult */
        return $answer->data;
    }

    /**
     * A refund watch and its state (`GET /v1/refunds/{provider}/{account}/{outRefundNo}`).
     *
     * @param 'alipay'|'wechatpay' $provider
     * @return Refund
     */
    public function getRefund(string $provider, string $account, string $outRefundNo): array
    {
        $answer = $this->call('GET', self::refundPath($provider, $account, $outRefundNo));
        /** @var Refund */
        return self::expect($answer, 'refund', 'array');
    }

    /**
     * Stops a refund watch (`DELETE /v1/refunds/{provider}/{account}/{outRefundNo}`); it then
     * reads `stopped` while it is retained.
     *
     * @param 'alipay'|'wechatpay' $provider
     */
    public function stopRefund(string $provider, string $account, string $outRefundNo): void
    {
        $answer = $this->call('DELETE', self::refundPath($provider, $account, $outRefundNo));
        self::expect($answer, 'deleted', 'bool');
    }

    /**
     * Creates or replaces a recurring schedule (`PUT /v1/schedules/{name}`): a job
     * `{name}@{fire ms}` in its topic at each time its cron names (5 fields, or 6 with seconds
     * first) in its timezone (an IANA name, default UTC). Put again as it is, it changes
     * nothing, so a retry is safe.
     *
     * @param ScheduleInput $schedule
     * @return Schedule
     */
    public function putSchedule(string $name, array $schedule): array
    {
        $answer = $this->call('PUT', self::schedulePath($name), body: $schedule);
        /** @var Schedule */
        return self::expect($answer, 'schedule', 'array');
    }

    /**
     * A schedule with its next and last fire times (`GET /v1/schedules/{name}`).
     *
     * @return Schedule
     */
    public function getSchedule(string $name): array
    {
        $answer = $this->call('GET', self::schedulePath($name));
        /** @var Schedule */
        return self::expect($answer, 'schedule', 'array');
    }

    /** Deletes a schedule (`DELETE /v1/schedules/{name}`); its fires made ahead are taken back. */
    public function deleteSchedule(string $name): void
    {
        $answer = $this->call('DELETE', self::schedulePath($name));
        self::expect($answer, 'deleted', 'bool');
    }

    /**
     * A page of schedules by name (`GET /v1/schedules`); pass `cursor` back while `hasMore`.
     * Any name as `$cursor` lists the schedules named after it.
     *
     * @return SchedulePage
     */
    public function listSchedules(?string $cursor = null, ?int $limit = null): array
    {
        $answer = $this->call('GET', '/v1/schedules', query: ['cursor' => $cursor, 'limit' => $limit]);
        self::expect($answer, 'schedules', 'list');
        /** @var SchedulePage */
        return $answer->data;
    }

    /**
     * @param array<string, string|int|null> $query
     * @param list<int> $answerStatuses
     */
    private function call(
        string $method,
        string $path,
        array $query = [],
        mixed $body = null,
        int $extraTimeoutMs = 0,
        bool $auth = true,
        array $answerStatuses = [],
    ): Answer {
        // Encoded once, so every attempt sends the same bytes (and the same generated ids).
        $json = $body === null ? null : Json::encode($body);
        return $this->transport->send($method, $path, $query, $json, $extraTimeoutMs, $auth, $answerStatuses);
    }

    /** @param array<string, mixed> $fields */
    private function verb(string $id, string $verb, array $fields): Answer
    {
        return $this->call('POST', '/v1/jobs/' . self::segment($id, 'job id') . '/' . $verb, body: self::fields($fields));
    }

    /**
     * The job with an id: its own, or a fresh UUID v4, so that the add can be retried safely.
     *
     * @template T of array<string, mixed>
     * @param T $job
     * @return T
     */
    private static function withId(array $job): array
    {
        if (!isset($job['id'])) {
            $job['id'] = self::uuid4();
        }
        return $job;
    }

    /**
     * What a handler threw, as a release's `error` (the job's lastError): its message (its class
     * when it has none), cut to 1 KiB with "…" at the cut.
     */
    private static function failureText(\Throwable $error): string
    {
        $text = $error->getMessage() !== '' ? $error->getMessage() : $error::class;
        if (strlen($text) <= 1024) {
            return $text;
        }
        $cut = substr($text, 0, 1021);
        while ($cut !== '' && preg_match('//u', $cut) !== 1) {
            $cut = substr($cut, 0, -1); // not into a character's middle
        }
        return $cut . '…';
    }

    /** A random UUID v4 (RFC 9562) from the CSPRNG. */
    private static function uuid4(): string
    {
        $bytes = random_bytes(16);
        $bytes[6] = chr((ord($bytes[6]) & 0x0F) | 0x40);
        $bytes[8] = chr((ord($bytes[8]) & 0x3F) | 0x80);
        return vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex($bytes), 4));
    }

    /**
     * Set fields only, as a JSON object even when none are set.
     *
     * @param array<string, mixed> $fields
     */
    private static function fields(array $fields): array|\stdClass
    {
        return self::object(array_filter($fields, static fn ($value): bool => $value !== null));
    }

    /**
     * An array meant as a JSON object: `[]` would encode as a JSON array.
     *
     * @param array<mixed> $value
     */
    private static function object(array $value): array|\stdClass
    {
        return $value === [] ? new \stdClass() : $value;
    }

    private static function waitMs(int|float|null $wait): int
    {
        return $wait !== null && is_finite((float) $wait) && $wait > 0 ? (int) ceil($wait * 1000) : 0;
    }

    /**
     * A path segment. "." and ".." (valid ids and topic names) are refused here: URL parsing
     * resolves them, even percent-encoded, so they would reach another route. The command
     * protocol takes such ids in the body.
     */
    private static function segment(string $value, string $what): string
    {
        if ($value === '' || $value === '.' || $value === '..') {
            throw new DelayqException(
                'invalid_request',
                "The {$what} " . json_encode($value) . ' cannot be sent in a URL path',
            );
        }
        return rawurlencode($value);
    }

    private static function paymentPath(string $provider, string $account, string $outTradeNo): string
    {
        return '/v1/payments/' . self::segment($provider, 'provider') . '/'
            . self::segment($account, 'account') . '/' . self::segment($outTradeNo, 'outTradeNo');
    }

    private static function schedulePath(string $name): string
    {
        return '/v1/schedules/' . self::segment($name, 'name');
    }

    private static function refundPath(string $provider, string $account, string $outRefundNo): string
    {
        return '/v1/refunds/' . self::segment($provider, 'provider') . '/'
            . self::segment($account, 'account') . '/' . self::segment($outRefundNo, 'outRefundNo');
    }

    /** @param 'array'|'list'|'int'|'bool'|'string' $kind */
    private static function expect(Answer $answer, string $key, string $kind): mixed
    {
        $value = is_array($answer->data) ? ($answer->data[$key] ?? null) : null;
        $ok = match ($kind) {
            'array' => is_array($value),
            'list' => is_array($value) && array_is_list($value),
            'int' => is_int($value),
            'bool' => is_bool($value),
            'string' => is_string($value),
        };
        if (!$ok) {
            throw self::invalidResponse($answer, ($kind === 'array' ? 'an object' : "a {$kind}") . " \"{$key}\"");
        }
        return $value;
    }

    /**
     * The page with its `hasMore`. A server older than the field sends none: it is read from the
     * `cursor` then, the same fact (a cursor comes only with a next page).
     *
     * @param array<string, mixed> $page
     * @return array<string, mixed>
     */
    private static function withHasMore(array $page): array
    {
        if (!is_bool($page['hasMore'] ?? null)) {
            $page['hasMore'] = isset($page['cursor']);
        }
        return $page;
    }

    private static function invalidResponse(Answer $answer, string $wanted): DelayqException
    {
        $text = json_encode($answer->data, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE);
        return new DelayqException(
            'invalid_response',
            "delayq's answer (HTTP {$answer->status}) lacks {$wanted}: " . substr((string) $text, 0, 200),
            $answer->status,
        );
    }
}
