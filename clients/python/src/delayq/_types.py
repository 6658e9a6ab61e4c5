"""The shapes delayq's API sends and answers, as TypedDicts keyed by the API's own field names."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Sequence, TypedDict, Union, final

# Times in answers are unix milliseconds; `delay`, `ttr` and `wait` in requests are seconds.

JobState = Literal["delayed", "ready", "reserved", "finished", "dead", "deleted"]
"""A job's state. ``finished`` and ``deleted`` records stay for the retention window."""

ListableState = Literal["delayed", "ready", "reserved", "dead"]
"""The states ``list_jobs`` can page through."""

ScheduleName = Literal[
    "wechatpay", "alipay", "youzan", "wechatpay-native", "alipay-f2f", "refund"
]
"""A named retry schedule (see the README's "Retries: the exact rule")."""

Provider = Literal["alipay", "wechatpay"]
"""A payment provider whose orders delayq can watch."""


class _ExponentialBackoffBase(TypedDict):
    type: Literal["exponential"]
    delay: float


class ExponentialBackoff(_ExponentialBackoffBase, total=False):
    """``min(max, delay * factor ** (n - 1))`` seconds before attempt ``n + 1``."""

    factor: float
    max: float


Backoff = Union[float, List[float], str, ExponentialBackoff]
"""A backoff as delayq answers it: seconds, a list of steps, a schedule name or exponential."""

BackoffInput = Union[float, Sequence[float], str, ExponentialBackoff]
"""A backoff as sent: seconds, steps (the last repeats), a ``ScheduleName``, or exponential."""

Timestamp = Union[int, str]
"""Unix milliseconds, or an ISO-8601 date-time with a zone (``"2030-01-01T00:00:00Z"``)."""


class _JobBase(TypedDict):
    id: str
    topic: str
    state: JobState
    body: Any
    dueAt: int
    ttr: int
    attempts: int
    maxAttempts: int
    createdAt: int


class LastError(TypedDict):
    """Why a job last failed: a release's or bury's ``error``, or a failed push delivery's."""

    message: str
    at: int
    attempt: int


class Job(_JobBase, total=False):
    """A job as delayq answers it. ``receipt`` comes with jobs handed out by ``pop``."""

    backoff: Backoff
    deadline: int
    reservedUntil: int
    receipt: str
    endedAt: int
    deadReason: Literal["attempts", "deadline", "buried"]
    lastError: LastError


class _AddJobBase(TypedDict):
    topic: str


class AddJob(_AddJobBase, total=False):
    """One job of ``add_batch``, with the API's field names (``runAt``, ``maxAttempts``)."""

    id: str
    body: Any
    delay: float
    runAt: Timestamp
    ttr: int
    maxAttempts: int
    backoff: BackoffInput
    deadline: Timestamp
    replace: bool


@final  # so that `"error" in item` tells a BatchItemResult's two shapes apart for type checkers
class AddResult(TypedDict):
    """``add``: the job, and whether this call created it (False: the id existed)."""

    created: bool
    job: Job


class ErrorBody(TypedDict):
    code: str
    message: str


@final
class BatchError(TypedDict):
    """An ``add_batch`` or ``finish_many`` item that was refused; the others go ahead regardless."""

    error: ErrorBody


BatchItemResult = Union[AddResult, BatchError]
"""One item of ``add_batch``'s answer: ``{"created", "job"}`` or ``{"error"}``."""


class _FinishJobBase(TypedDict):
    id: str


class FinishJob(_FinishJobBase, total=False):
    """One job of ``finish_many``: a ``Job`` as ``pop`` gave it, or ``{"id", "receipt"}``."""

    receipt: str


@final
class FinishResult(TypedDict):
    """A ``finish_many`` item that finished (or had finished already)."""

    finished: Literal[True]


FinishItemResult = Union[FinishResult, BatchError]
"""One item of ``finish_many``'s answer: ``{"finished": True}`` or ``{"error"}``."""


@final
class PopResult(TypedDict):
    """``finish_and_pop``'s answer: the jobs reserved, and what became of the jobs given."""

    jobs: List[Job]
    finished: List[FinishItemResult]


class _JobPageBase(TypedDict):
    jobs: List[Job]
    hasMore: bool


class JobPage(_JobPageBase, total=False):
    """A page of jobs; pass ``cursor`` back for the next page while ``hasMore`` (on the last
    page ``hasMore`` is false and there is no ``cursor``)."""

    cursor: str


class _PushConfigBase(TypedDict):
    url: str


class PushConfig(_PushConfigBase, total=False):
    """Where a push topic's due jobs are POSTed. A given ``secret`` is never echoed back.
    ``rate`` (deliveries a second) and ``parallelism`` (unanswered at once), 1-1000, hold due
    jobs back; they go out in due order as room frees."""

    via: Literal["direct", "qstash"]
    secret: str
    timeout: int
    failureUrl: str
    headers: Dict[str, str]
    rate: int
    parallelism: int


class TopicConfig(TypedDict, total=False):
    """A topic's config as stored: job defaults, ``paused``, and ``push`` for push topics."""

    ttr: int
    maxAttempts: int
    backoff: Backoff
    paused: bool
    push: PushConfig


class TopicConfigInput(TypedDict, total=False):
    """The whole config for ``configure_topic`` (a PUT: fields left out are removed)."""

    ttr: int
    maxAttempts: int
    backoff: BackoffInput
    paused: bool
    push: Union[PushConfig, None]


class TopicConfigPatch(TypedDict, total=False):
    """Changes for ``update_topic``: given fields change, ``None`` removes one, others stay."""

    ttr: Union[int, None]
    maxAttempts: Union[int, None]
    backoff: Union[BackoffInput, None]
    paused: Union[bool, None]
    push: Union[PushConfig, None]


class TopicCounts(TypedDict):
    delayed: int
    ready: int
    reserved: int
    dead: int


class _TopicStatsBase(TypedDict):
    topic: str
    counts: TopicCounts
    config: TopicConfig


class PushStats(TypedDict):
    """A push topic's deliveries answered (done, retry, bury) and attempts failed."""

    delivered: int
    failed: int


class TopicStats(_TopicStatsBase, total=False):
    """A topic's counts per state, earliest due time (absent when none wait) and config; push
    topics also ``push`` (their delivery counts), ``heldBack`` (due jobs not yet sent, held back
    by ``rate`` or ``parallelism``) and ``heldBackSince`` (the earliest due time among them)."""

    oldestDueAt: int
    push: PushStats
    heldBack: int
    heldBackSince: int


class _TopicPageBase(TypedDict):
    topics: List[TopicStats]
    hasMore: bool


class TopicPage(_TopicPageBase, total=False):
    """A page of topics; pass ``cursor`` back as ``cursor`` for the next page while ``hasMore``
    (on the last page ``hasMore`` is false and there is no ``cursor``)."""

    cursor: str


class _CommandBase(TypedDict):
    command: Literal["add", "pop", "finish", "delete", "get", "touch", "release", "bury"]


class Command(_CommandBase, total=False):
    """One command of the command protocol, e.g. ``{"command": "pop", "topic": "t"}``."""

    topic: str
    id: str
    body: Any
    delay: float
    runAt: Timestamp
    TTR: int
    ttr: int
    maxAttempts: int
    backoff: BackoffInput
    deadline: Timestamp
    replace: bool
    wait: float
    receipt: str


class _CommandResultBase(TypedDict):
    success: bool
    error: str


class CommandResult(_CommandResultBase, total=False):
    """``{success, error, id, value}``; ``error`` is ``"<code>: <message>"`` when it failed.

    ``add`` also answers ``created`` (False when the id existed), ``pop`` the ``receipt``.
    """

    id: str
    value: Any
    created: bool
    receipt: str


class _HealthBase(TypedDict):
    status: str


class Health(_HealthBase, total=False):
    """``{"status": "ok", "redis": "ok"}``, or ``"degraded"`` with Redis ``"unreachable"``."""

    redis: str
    message: str


class PaymentAnswer(TypedDict):
    """The provider's last answer to a poll: its own word for the trade's state, and when."""

    tradeState: str
    at: int


class PaymentAmount(TypedDict):
    total: int
    currency: str


class _PaymentOutcomeBase(TypedDict):
    event: str
    provider: Provider
    account: str
    outTradeNo: str
    tradeState: str
    source: Literal["poll", "notify"]
    polls: int


class PaymentOutcome(_PaymentOutcomeBase, total=False):
    """What a watch ended with; also the body of the job added to each ``notify`` topic."""

    tradeNo: str
    amount: PaymentAmount
    #: On payment.mismatch: the amount the watch expected (``amount`` is the provider's).
    expected: PaymentAmount
    paidAt: Any
    metadata: Any


class _PaymentBase(TypedDict):
    provider: Provider
    account: str
    outTradeNo: str
    state: Literal["polling", "paid", "closed", "failed", "expired", "stopped", "mismatch"]
    polls: int
    createdAt: int
    deadline: int
    notify: List[str]


class Payment(_PaymentBase, total=False):
    """A payment watch: delayq polling one order at Alipay or WeChat Pay."""

    nextPollAt: int
    lastAnswer: PaymentAnswer
    outcome: PaymentOutcome
    #: The amount the order must be paid, when the watch was given one.
    amount: PaymentAmount
    metadata: Any


class WatchResult(TypedDict):
    """``watch_payment``: the watch, and whether this call started it (False: it existed)."""

    created: bool
    payment: Payment


class RefundAnswer(TypedDict):
    """The provider's last answer to a refund query: its own word (or the error), and when."""

    status: str
    at: int


class RefundAmount(TypedDict):
    """A refund's amounts in the smallest unit (fen): refunded, and the order's total."""

    refund: int
    total: int
    currency: str


class _RefundOutcomeBase(TypedDict):
    event: Literal["refund.succeeded", "refund.closed", "refund.abnormal", "refund.expired"]
    provider: Provider
    account: str
    outRefundNo: str
    status: str
    source: Literal["poll", "notify"]
    polls: int


class RefundOutcome(_RefundOutcomeBase, total=False):
    """What a refund watch ended with; also the body of the job added to each ``notify`` topic."""

    outTradeNo: str
    refundNo: str
    #: Always there on refund.succeeded.
    amount: RefundAmount
    succeededAt: int
    #: A success told after the watch had ended (expired, closed, abnormal, stopped).
    late: bool
    metadata: Any


class _RefundBase(TypedDict):
    provider: Provider
    account: str
    outRefundNo: str
    state: Literal["polling", "succeeded", "closed", "abnormal", "expired", "stopped"]
    polls: int
    createdAt: int
    deadline: int
    notify: List[str]


class Refund(_RefundBase, total=False):
    """A refund watch: delayq polling one refund at Alipay or WeChat Pay."""

    outTradeNo: str
    nextPollAt: int
    lastAnswer: RefundAnswer
    outcome: RefundOutcome
    #: After a late success: the outcome the watch had ended with before it.
    firstOutcome: RefundOutcome
    metadata: Any


class _ScheduleBase(TypedDict):
    name: str
    cron: str
    timezone: str
    topic: str
    body: Any
    paused: bool
    #: When the next fire is due, unix ms; None while paused.
    nextRunAt: Union[int, None]
    createdAt: int


class Schedule(_ScheduleBase, total=False):
    """A recurring schedule: a job ``{name}@{fire ms}`` in its topic at each time its cron names."""

    ttr: int
    maxAttempts: int
    #: When the last fire made was due, unix ms (absent before the first).
    lastRunAt: int


class _SchedulePageBase(TypedDict):
    schedules: List[Schedule]
    hasMore: bool


class SchedulePage(_SchedulePageBase, total=False):
    """``list_schedules``: a page by name; ``cursor`` for the next page while ``hasMore``."""

    cursor: str


class WatchRefundResult(TypedDict):
    """``watch_refund``: the watch, and whether this call started it (False: it existed)."""

    created: bool
    refund: Refund
