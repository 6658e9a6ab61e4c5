"""delayq.Client: one method per route of delayq's HTTP API, typed, with retries."""

from __future__ import annotations

import math
import threading
import uuid
from types import TracebackType
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Type,
    Union,
    cast,
    overload,
)
from urllib.parse import quote

from ._errors import DelayqError
from ._transport import Answer, QueryValue, Transport, json_object
from ._types import (
    AddJob,
    AddResult,
    BackoffInput,
    BatchItemResult,
    Command,
    CommandResult,
    FinishItemResult,
    FinishJob,
    Health,
    Job,
    JobPage,
    ListableState,
    Payment,
    PopResult,
    Provider,
    Refund,
    Schedule,
    SchedulePage,
    Timestamp,
    TopicConfig,
    TopicConfigInput,
    TopicConfigPatch,
    TopicPage,
    TopicStats,
    WatchRefundResult,
    WatchResult,
)
from ._worker import work as _work


class Client:
    """The delayq API. Every method raises :class:`DelayqError` when delayq refuses or cannot be
    reached; results are dicts with the API's field names (``dueAt``, ``maxAttempts``).

    Use it as a context manager, or call :meth:`close`, to close its kept-alive connections.
    One client may be shared by threads.

    Retrying is safe for each call:

    - ``add``, ``add_batch`` and ``command`` add jobs: the client gives every job without an id
      a random UUID before the first attempt, so a retry of an add that did land finds the job
      and answers ``created: False`` instead of adding a twin.
    - reads, ``finish``, ``finish_many``, ``delete``, ``touch``, ``configure_topic`` and
      ``update_topic`` come out the same when repeated; ``stop_payment``, ``watch_payment``,
      ``stop_refund`` and ``watch_refund`` are idempotent too.
    - ``release`` and ``bury``: if the lost attempt landed, the retry answers 409
      ``not_reserved``; the job did move.
    - ``pop``: jobs a lost attempt reserved come back to the topic when their TTR runs out.
    - ``kick`` and ``delete_dead`` by count may act on up to ``count`` more dead jobs.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        retries: int = 3,
        retry_delay: float = 0.2,
        max_retry_delay: float = 5.0,
        timeout: float = 30.0,
    ) -> None:
        """
        :param base_url: where delayq is served, without ``/v1``: ``http://127.0.0.1:8787``.
        :param token: a bearer token from the server's ``DQ_TOKENS``.
        :param retries: retries after a 503, a network error or a timeout; never after any
            other status. 0 turns retrying off.
        :param retry_delay: the first retry's wait, seconds; it doubles on each retry, with
            jitter, and is at least what the server's ``Retry-After`` asks.
        :param max_retry_delay: the longest wait between two attempts, whatever
            ``Retry-After`` says.
        :param timeout: time limit of each attempt, seconds, from connecting to the whole body
            read. A long-polling ``pop`` (and a ``command`` that pops with ``wait``) gets its
            ``wait`` on top.
        """
        if not isinstance(base_url, str) or base_url == "":
            raise ValueError("delayq.Client: base_url is required, e.g. http://127.0.0.1:8787")
        if not isinstance(token, str) or token == "":
            raise ValueError("delayq.Client: token is required")
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ValueError("delayq.Client: retries must be an integer >= 0")
        self._transport = Transport(
            base_url,
            token,
            retries=retries,
            retry_delay=_non_negative(retry_delay, "retry_delay"),
            max_retry_delay=_non_negative(max_retry_delay, "max_retry_delay"),
            timeout=_positive(timeout, "timeout"),
        )
        self._base_url = base_url

    def __repr__(self) -> str:
        return f"delayq.Client({self._base_url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the client's connections. Calls made afterwards raise ``RuntimeError``."""
        self._transport.close()

    @property
    def closed(self) -> bool:
        return self._transport.closed

    # Jobs

    def add(
        self,
        topic: str,
        body: Any = None,
        *,
        id: Optional[str] = None,
        delay: Optional[float] = None,
        run_at: Optional[Timestamp] = None,
        ttr: Optional[int] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[BackoffInput] = None,
        deadline: Optional[Timestamp] = None,
        replace: Optional[bool] = None,
    ) -> AddResult:
        """Adds a job (``POST /v1/jobs``): ``body`` (any JSON value) to ``topic``, due after
        ``delay`` seconds or at ``run_at`` (unix ms or ISO-8601). Without ``id`` the client
        makes one (a UUID) so that retries cannot add it twice. ``created`` is False when the
        id already existed in the topic: the stored job comes back unchanged."""
        job = _compact(
            {
                "topic": topic,
                "id": id if id is not None else str(uuid.uuid4()),
                "body": body,
                "delay": delay,
                "runAt": run_at,
                "ttr": ttr,
                "maxAttempts": max_attempts,
                "backoff": backoff,
                "deadline": deadline,
                "replace": replace,
            }
        )
        answer = self._call("POST", "/v1/jobs", body=job)
        _expect(answer, "created", bool)
        _expect(answer, "job", dict)
        return cast(AddResult, answer.data)

    def add_batch(self, jobs: Sequence[AddJob]) -> List[BatchItemResult]:
        """Adds up to 1000 jobs in one request (``POST /v1/jobs/batch``), each a dict with the
        API's field names (``{"topic", "body", "delay", "runAt", "maxAttempts", ...}``). Each
        is validated and added on its own: one result per item, in order, ``{"created",
        "job"}`` or ``{"error": {"code", "message"}}``. Items without ``id`` get one."""
        answer = self._call("POST", "/v1/jobs/batch", body={"jobs": [_with_id(j) for j in jobs]})
        return cast(List[BatchItemResult], _expect(answer, "results", list))

    def get(self, id: str) -> Job:
        """The job and its current state (``GET /v1/jobs/{id}``)."""
        answer = self._call("GET", f"/v1/jobs/{_segment(id, 'job id')}")
        return cast(Job, _expect(answer, "job", dict))

    def delete(self, id: str) -> None:
        """Deletes a job in any state (``DELETE /v1/jobs/{id}``); deleting it again succeeds."""
        answer = self._call("DELETE", f"/v1/jobs/{_segment(id, 'job id')}")
        _expect(answer, "deleted", bool)

    def pop(
        self, topic: str, count: Optional[int] = None, wait: Optional[float] = None
    ) -> List[Job]:
        """Reserves up to ``count`` (1-100, default 1) ready jobs of a topic (``POST
        /v1/topics/{topic}/pop``), each with a ``receipt`` and leased for its TTR. With
        ``wait`` (seconds, up to 20) it long-polls for a job; ``[]`` when none came."""
        answer = self._call(
            "POST",
            f"/v1/topics/{_segment(topic, 'topic')}/pop",
            body=_compact({"count": count, "wait": wait}),
            # The server holds the request open for `wait`: that time is not a timeout.
            timeout=self._transport.timeout + _wait_seconds(wait),
        )
        return cast(List[Job], _expect(answer, "jobs", list))

    def finish(self, id: str, receipt: Optional[str] = None) -> None:
        """Finishes a reserved job (``POST /v1/jobs/{id}/finish``). With ``receipt``, only that
        reservation may finish it (else ``stale_receipt``); finishing it again succeeds."""
        answer = self._verb(id, "finish", {"receipt": receipt})
        _expect(answer, "finished", bool)

    def finish_many(self, jobs: Sequence[FinishJob]) -> List[FinishItemResult]:
        """Finishes up to 100 reserved jobs in one request (``POST /v1/jobs/finish``): pass what
        ``pop`` gave (only each job's ``id`` and ``receipt`` are sent), or ``{"id", "receipt"}``
        dicts (sent as they are, as is a job read with ``get``, so the server refuses a misspelt
        field). One result per job, in order, ``{"finished": True}`` or ``{"error": {"code",
        "message"}}``; a refused job leaves the others finished. An empty list (a pop that found
        nothing) sends nothing and answers ``[]``."""
        if not jobs:
            return []
        answer = self._call("POST", "/v1/jobs/finish", body={"jobs": _finish_items(jobs)})
        return cast(List[FinishItemResult], _expect(answer, "results", list))

    def finish_and_pop(
        self,
        topic: str,
        jobs: Sequence[FinishJob],
        count: Optional[int] = None,
        wait: Optional[float] = None,
    ) -> PopResult:
        """Finishes what the last pop gave and pops the next, in one request and one script
        call (``POST /v1/topics/{topic}/pop`` with ``finish``), as BullMQ's worker and
        JetStream's AckNext do. Answers ``{"jobs": [...], "finished": [...]}``: the jobs
        reserved, and one result per job given, as ``finish_many`` answers. The jobs are
        finished before the pop takes any and stay finished whatever it does; with ``wait``,
        the answer comes when the wait ends."""
        answer = self._call(
            "POST",
            f"/v1/topics/{_segment(topic, 'topic')}/pop",
            body=_compact({"count": count, "wait": wait, "finish": _finish_items(jobs)}),
            timeout=self._transport.timeout + _wait_seconds(wait),
        )
        finished = cast(List[FinishItemResult], _expect(answer, "finished", list))
        return {"jobs": cast(List[Job], _expect(answer, "jobs", list)), "finished": finished}

    def work(
        self,
        topic: str,
        handler: Callable[[Job], object],
        *,
        concurrency: int = 1,
        count: int = 1,
        wait: float = 20,
        stop: Optional[threading.Event] = None,
        on_error: Optional[Callable[[BaseException, Optional[Job]], None]] = None,
        retry_delay: float = 1.0,
    ) -> None:
        """Runs ``handler(job)`` for each job of ``topic`` until ``stop`` is set (or Ctrl-C),
        like RQ's and BullMQ's workers; blocks until then. ``concurrency`` threads each pop
        ``count`` jobs and run them one after the other, finishing the jobs their handler ran in
        the pop that takes the next ones (``finish_and_pop``: one request a job), without a wait
        while they hold some and long-polling ``wait`` seconds when they hold none (a stop takes
        effect when that long-poll ends). A handler that raises has its job released, to run
        again after the topic's backoff step or to die out of attempts. While a handler runs, a
        thread extends the job's lease every half of its TTR. What is not raised (a handler's
        exception, a refused finish or touch, a failed call, retried after ``retry_delay``
        seconds) goes to ``on_error(error, job)``. Returns once every loop has ended and the jobs
        its handlers ran are finished; raises ``DelayqError`` when delayq refuses a pop (a 4xx:
        a token without the topic, a push topic), since asking again would not help."""
        _work(
            self,
            topic,
            handler,
            concurrency=concurrency,
            count=count,
            wait=wait,
            stop=stop,
            on_error=on_error,
            retry_delay=retry_delay,
        )

    def touch(self, id: str, receipt: Optional[str] = None) -> Job:
        """Extends a reservation by the job's TTR from now (``POST /v1/jobs/{id}/touch``)."""
        return cast(Job, _expect(self._verb(id, "touch", {"receipt": receipt}), "job", dict))

    def release(
        self,
        id: str,
        receipt: Optional[str] = None,
        delay: Optional[float] = None,
        error: Optional[str] = None,
    ) -> Job:
        """Gives a reserved job back (``POST /v1/jobs/{id}/release``), to run again after
        ``delay`` seconds, or after its backoff step (or to die, out of attempts). ``error``
        (up to 1 KiB): why the attempt failed, which the job then shows as ``lastError``."""
        answer = self._verb(id, "release", {"receipt": receipt, "delay": delay, "error": error})
        return cast(Job, _expect(answer, "job", dict))

    def bury(self, id: str, receipt: Optional[str] = None, error: Optional[str] = None) -> Job:
        """Moves a reserved job to its topic's dead letter (``POST /v1/jobs/{id}/bury``);
        ``error`` as for ``release``."""
        answer = self._verb(id, "bury", {"receipt": receipt, "error": error})
        return cast(Job, _expect(answer, "job", dict))

    def reschedule(
        self, id: str, *, delay: Optional[float] = None, run_at: Optional[Timestamp] = None
    ) -> Job:
        """Gives a delayed or ready job a new due time (``POST /v1/jobs/{id}/reschedule``):
        ``delay`` seconds from now or ``run_at`` (unix ms or ISO-8601; a time past means due
        now), one of them. Any other state raises ``DelayqError`` ``invalid_state`` (409)."""
        answer = self._verb(id, "reschedule", {"delay": delay, "runAt": run_at})
        return cast(Job, _expect(answer, "job", dict))

    def promote(self, id: str) -> Job:
        """Makes a delayed job ready now (``POST /v1/jobs/{id}/promote``); any other state
        raises ``DelayqError`` ``invalid_state`` (409)."""
        return cast(Job, _expect(self._verb(id, "promote", {}), "job", dict))

    # Dead letter

    def kick(
        self, topic: str, *, ids: Optional[Sequence[str]] = None, count: Optional[int] = None
    ) -> int:
        """Moves dead jobs back to ready with attempts reset (``POST /v1/topics/{topic}/kick``):
        the given ``ids``, or the ``count`` oldest (up to 1000 when neither is given). Returns
        how many moved."""
        body = _compact({"ids": None if ids is None else list(ids), "count": count})
        answer = self._call("POST", f"/v1/topics/{_segment(topic, 'topic')}/kick", body=body)
        return cast(int, _expect(answer, "kicked", int))

    def delete_dead(self, topic: str, count: Optional[int] = None) -> int:
        """Deletes a topic's ``count`` oldest dead jobs (``DELETE /v1/topics/{topic}/dead``;
        default and most 1000). Returns how many."""
        answer = self._call(
            "DELETE", f"/v1/topics/{_segment(topic, 'topic')}/dead", query={"count": count}
        )
        return cast(int, _expect(answer, "deleted", int))

    # Topics

    def topics(
        self,
        *,
        cursor: Optional[str] = None,
        limit: Optional[int] = None,
        after: Optional[str] = None,
    ) -> TopicPage:
        """A page of topics by name with their stats (``GET /v1/topics``), only those the token
        may act on. Pass ``cursor`` back as ``cursor`` for the next page, while ``hasMore``. A
        token not limited to topics may also give a name as ``cursor`` (the topics after it).
        ``after`` is ``cursor``'s former name, still accepted."""
        start = cursor if cursor is not None else after
        answer = self._call("GET", "/v1/topics", query={"cursor": start, "limit": limit})
        _expect(answer, "topics", list)
        return cast(TopicPage, _with_has_more(answer.data))

    def topic(self, topic: str) -> TopicStats:
        """A topic's counts per state, earliest due time and config (``GET /v1/topics/{t}``)."""
        answer = self._call("GET", f"/v1/topics/{_segment(topic, 'topic')}")
        _expect(answer, "counts", dict)
        return cast(TopicStats, answer.data)

    def list_jobs(
        self,
        topic: str,
        state: ListableState,
        *,
        cursor: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> JobPage:
        """A page of a topic's jobs in one state (``GET /v1/topics/{topic}/jobs``): ``delayed``,
        ``ready``, ``reserved`` or ``dead``. Pass ``cursor`` back for the next page, while
        ``hasMore``."""
        answer = self._call(
            "GET",
            f"/v1/topics/{_segment(topic, 'topic')}/jobs",
            query={"state": state, "cursor": cursor, "limit": limit},
        )
        _expect(answer, "jobs", list)
        return cast(JobPage, _with_has_more(answer.data))

    def configure_topic(self, topic: str, config: TopicConfigInput) -> TopicConfig:
        """Replaces a topic's whole config (``PUT /v1/topics/{topic}``), e.g. ``{"ttr": 30,
        "backoff": "wechatpay", "paused": False, "push": {"url": ...}}``; fields left out are
        removed. Returns the config as stored (a push ``secret`` masked)."""
        answer = self._call("PUT", f"/v1/topics/{_segment(topic, 'topic')}", body=dict(config))
        return cast(TopicConfig, _expect(answer, "config", dict))

    def update_topic(self, topic: str, changes: TopicConfigPatch) -> TopicConfig:
        """Changes some fields of a topic's config (``PATCH /v1/topics/{topic}``): the fields
        given are set, a field given as ``None`` is removed, the others are kept. Returns the
        config as stored."""
        answer = self._call("PATCH", f"/v1/topics/{_segment(topic, 'topic')}", body=dict(changes))
        return cast(TopicConfig, _expect(answer, "config", dict))

    # The command protocol

    @overload
    def command(self, command: Command) -> CommandResult: ...

    @overload
    def command(self, command: Sequence[Command]) -> List[CommandResult]: ...

    def command(
        self, command: Union[Command, Sequence[Command]]
    ) -> Union[CommandResult, List[CommandResult]]:
        """Runs one command of the command protocol (``POST /v1/command``), or a list of up to
        1000 in order. A failed command answers ``success: False`` with ``error: "<code>:
        <message>"`` rather than raising; the call raises only when the request as a whole
        fails (for a lone command, that includes ``redis_unavailable``). ``add`` commands
        without ``id`` get one, as in :meth:`add`."""
        many = isinstance(command, (list, tuple))
        listed: Sequence[Mapping[str, Any]] = (
            cast(Sequence[Mapping[str, Any]], command)
            if many
            else [cast(Mapping[str, Any], command)]
        )
        sent = [_with_id(c) if c.get("command") == "add" else dict(c) for c in listed]
        # Commands run one after another, so each pop's wait adds up.
        waits = sum(_wait_seconds(c.get("wait")) for c in listed if c.get("command") == "pop")
        answer = self._call(
            "POST",
            "/v1/command",
            body=sent if many else sent[0],
            timeout=self._transport.timeout + waits,
        )
        data: object = answer.data
        if many and isinstance(data, list):
            return cast(List[CommandResult], data)
        if not many and isinstance(data, dict):
            return cast(CommandResult, data)
        raise _invalid_response(answer, "a list of results" if many else "a command result")

    # Payment watches

    def watch_payment(
        self,
        provider: Provider,
        account: str,
        out_trade_no: str,
        notify: Sequence[str],
        *,
        schedule: Optional[BackoffInput] = None,
        deadline: Optional[Timestamp] = None,
        close_on_deadline: Optional[bool] = None,
        amount: Optional[Mapping[str, Any]] = None,
        metadata: Any = None,
    ) -> WatchResult:
        """Starts watching an order at Alipay or WeChat Pay (``POST /v1/payments``): delayq
        polls the provider on ``schedule`` (default: the provider's own) until the order is
        paid, closed or failed, or ``deadline`` passes (then closes it if
        ``close_on_deadline``), and adds the outcome as a job to each ``notify`` topic, with
        ``metadata`` in it. ``account`` names one of the server's configured accounts.
        ``amount`` (``{"total": fen, "currency": "CNY"}``) is what the order must be paid: paid
        with another, the watch ends ``mismatch`` (event ``payment.mismatch``). A watch is
        idempotent by (provider, account, out_trade_no): ``created`` is False when it existed."""
        body = _compact(
            {
                "provider": provider,
                "account": account,
                "outTradeNo": out_trade_no,
                "notify": list(notify),
                "schedule": schedule,
                "deadline": deadline,
                "closeOnDeadline": close_on_deadline,
                "amount": None if amount is None else dict(amount),
                "metadata": metadata,
            }
        )
        answer = self._call("POST", "/v1/payments", body=body)
        _expect(answer, "created", bool)
        _expect(answer, "payment", dict)
        return cast(WatchResult, answer.data)

    def get_payment(self, provider: Provider, account: str, out_trade_no: str) -> Payment:
        """A payment watch and its state (``GET /v1/payments/{provider}/{account}/{no}``)."""
        answer = self._call("GET", _payment_path(provider, account, out_trade_no))
        return cast(Payment, _expect(answer, "payment", dict))

    def stop_payment(self, provider: Provider, account: str, out_trade_no: str) -> None:
        """Stops a payment watch (``DELETE /v1/payments/{provider}/{account}/{no}``)."""
        answer = self._call("DELETE", _payment_path(provider, account, out_trade_no))
        _expect(answer, "deleted", bool)

    # Refund watches

    def watch_refund(
        self,
        provider: Provider,
        account: str,
        out_refund_no: str,
        notify: Sequence[str],
        *,
        out_trade_no: Optional[str] = None,
        schedule: Optional[BackoffInput] = None,
        deadline: Optional[Timestamp] = None,
        metadata: Any = None,
    ) -> WatchRefundResult:
        """Starts watching a refund at Alipay or WeChat Pay (``POST /v1/refunds``): delayq
        queries the provider on ``schedule`` (default: the ``refund`` preset, 1 min, 5, 10, 20,
        30 min) until the refund succeeds, closes or goes abnormal, or ``deadline`` (default 7
        days) passes, and adds the outcome (``refund.succeeded``, …) as a job to each ``notify``
        topic, with ``metadata`` in it. ``out_trade_no``, the refunded order, is required for
        Alipay. A refund watch is idempotent by (provider, account, out_refund_no): ``created``
        is False when it existed."""
        body = _compact(
            {
                "provider": provider,
                "account": account,
                "outRefundNo": out_refund_no,
                "outTradeNo": out_trade_no,
                "notify": list(notify),
                "schedule": schedule,
                "deadline": deadline,
                "metadata": metadata,
            }
        )
        answer = self._call("POST", "/v1/refunds", body=body)
        _expect(answer, "created", bool)
        _expect(answer, "refund", dict)
        return cast(WatchRefundResult, answer.data)

    def get_refund(self, provider: Provider, account: str, out_refund_no: str) -> Refund:
        """A refund watch and its state (``GET /v1/refunds/{provider}/{account}/{no}``)."""
        answer = self._call("GET", _refund_path(provider, account, out_refund_no))
        return cast(Refund, _expect(answer, "refund", dict))

    def stop_refund(self, provider: Provider, account: str, out_refund_no: str) -> None:
        """Stops a refund watch (``DELETE /v1/refunds/{provider}/{account}/{no}``)."""
        answer = self._call("DELETE", _refund_path(provider, account, out_refund_no))
        _expect(answer, "deleted", bool)

    # Recurring schedules

    def put_schedule(
        self,
        name: str,
        cron: str,
        topic: str,
        *,
        timezone: Optional[str] = None,
        body: Any = None,
        ttr: Optional[int] = None,
        max_attempts: Optional[int] = None,
        paused: Optional[bool] = None,
    ) -> Schedule:
        """Creates or replaces a recurring schedule (``PUT /v1/schedules/{name}``): a job
        ``{name}@{fire ms}`` in ``topic`` at each time ``cron`` names (5 fields, or 6 with
        seconds first) in ``timezone`` (an IANA name, default UTC). Putting it again as it is
        changes nothing, so a retry is safe; ``paused=True`` makes no fire."""
        payload = _compact(
            {
                "cron": cron,
                "timezone": timezone,
                "topic": topic,
                "body": body,
                "ttr": ttr,
                "maxAttempts": max_attempts,
                "paused": paused,
            }
        )
        answer = self._call("PUT", _schedule_path(name), body=payload)
        return cast(Schedule, _expect(answer, "schedule", dict))

    def get_schedule(self, name: str) -> Schedule:
        """A schedule with its next and last fire times (``GET /v1/schedules/{name}``)."""
        answer = self._call("GET", _schedule_path(name))
        return cast(Schedule, _expect(answer, "schedule", dict))

    def delete_schedule(self, name: str) -> None:
        """Deletes a schedule (``DELETE /v1/schedules/{name}``); its fires made ahead and not
        yet due are taken back."""
        answer = self._call("DELETE", _schedule_path(name))
        _expect(answer, "deleted", bool)

    def list_schedules(
        self, *, cursor: Optional[str] = None, limit: Optional[int] = None
    ) -> SchedulePage:
        """A page of schedules by name (``GET /v1/schedules``); pass ``cursor`` back while
        ``hasMore``. Any name as ``cursor`` lists the schedules named after it."""
        answer = self._call("GET", "/v1/schedules", query={"cursor": cursor, "limit": limit})
        _expect(answer, "schedules", list)
        return cast(SchedulePage, answer.data)

    # Service

    def health(self) -> Health:
        """Whether delayq is up and reaches Redis (``GET /health``, no token sent). Answers the
        body for a 503 too (``status: "degraded"``) rather than raising."""
        answer = self._call("GET", "/health", auth=False, answer_statuses=(503,))
        _expect(answer, "status", str)
        return cast(Health, answer.data)

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Optional[Mapping[str, QueryValue]] = None,
        timeout: Optional[float] = None,
        auth: bool = True,
        answer_statuses: Sequence[int] = (),
    ) -> Answer:
        return self._transport.send(
            method,
            path,
            query=query,
            body=body,
            has_body=method in ("POST", "PUT", "PATCH"),
            timeout=timeout,
            auth=auth,
            answer_statuses=answer_statuses,
        )

    def _verb(self, id: str, verb: str, body: Dict[str, Any]) -> Answer:
        return self._call("POST", f"/v1/jobs/{_segment(id, 'job id')}/{verb}", body=_compact(body))


def _non_negative(value: float, name: str) -> float:
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"delayq.Client: {name} must be a number >= 0")
    return float(value)


def _positive(value: float, name: str) -> float:
    if _non_negative(value, name) == 0:
        raise ValueError(f"delayq.Client: {name} must be greater than 0")
    return float(value)


def _compact(fields: Mapping[str, Any]) -> Dict[str, Any]:
    """The fields that were given: ``None`` means "leave it to the server"."""
    return {k: v for k, v in fields.items() if v is not None}


def _with_id(job: Mapping[str, object]) -> Dict[str, Any]:
    """The job with an id: its own, or a fresh UUID, so that the add can be retried safely."""
    out = dict(job)
    if out.get("id") is None:
        out["id"] = str(uuid.uuid4())
    return out


def _wait_seconds(wait: Any) -> float:
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and math.isfinite(wait):
        return max(0.0, float(wait))
    return 0.0


def _segment(value: str, what: str) -> str:
    """A path segment. "." and ".." (valid ids and topic names) are refused: URL parsing resolves
    them, even percent-encoded, so they would reach another route (``GET /v1/topics/./jobs`` is
    ``GET /v1/topics/jobs``). The command protocol takes such ids in the body."""
    if not isinstance(value, str) or value in ("", ".", ".."):
        raise DelayqError(
            "invalid_request", 0, f"The {what} {value!r} cannot be sent in a URL path"
        )
    return quote(value, safe="")


def _payment_path(provider: str, account: str, out_trade_no: str) -> str:
    return (
        f"/v1/payments/{_segment(provider, 'provider')}/{_segment(account, 'account')}"
        f"/{_segment(out_trade_no, 'outTradeNo')}"
    )


def _schedule_path(name: str) -> str:
    return f"/v1/schedules/{_segment(name, 'name')}"


def _refund_path(provider: str, account: str, out_refund_no: str) -> str:
    return (
        f"/v1/refunds/{_segment(provider, 'provider')}/{_segment(account, 'account')}"
        f"/{_segment(out_refund_no, 'outRefundNo')}"
    )


def _expect(answer: Answer, key: str, kind: type) -> Any:
    data = json_object(answer.data)
    value = data.get(key) if data is not None else None
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise _invalid_response(answer, f'a {kind.__name__} "{key}"')
    return value


def _with_has_more(data: Any) -> Any:
    """The page with its ``hasMore``. A server older than the field sends none: it is read from
    the ``cursor`` then, the same fact (a cursor comes only with a next page)."""
    page = cast(Dict[str, Any], data)
    if not isinstance(page.get("hasMore"), bool):
        page["hasMore"] = "cursor" in page
    return page


def _invalid_response(answer: Answer, wanted: str) -> DelayqError:
    text = repr(answer.data)[:200]
    return DelayqError(
        "invalid_response",
        answer.status,
        f"delayq's answer (HTTP {answer.status}) lacks {wanted}: {text}",
    )


def _finish_items(jobs: Sequence[FinishJob]) -> List[Any]:
    """Jobs to finish as the server takes them. A job as pop answered it (with its state and
    receipt) goes as its id and receipt. Any other item goes as it is, a job read with get too,
    so that the server refuses a misspelt field ("reciept") instead of finishing the job for
    whoever holds it."""
    return [
        {"id": j.get("id"), "receipt": j["receipt"]}
        if "state" in j and isinstance(j.get("receipt"), str)
        else _compact(j)
        for j in jobs
    ]
