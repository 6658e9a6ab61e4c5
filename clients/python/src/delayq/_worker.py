"""A consumer loop over the client, as RQ's and BullMQ's workers: pop, run the handler, finish in
the next pop (``finish_and_pop``), give a job back when its handler raises, keep its lease while
it runs."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence

from ._errors import DelayqError
from ._types import FinishItemResult, Job

if TYPE_CHECKING:
    from ._client import Client

#: What the worker tells ``on_error``: the error, and the job it concerns (None for a call).
ErrorReporter = Callable[[BaseException, Optional[Job]], None]


def _refused(error: BaseException) -> bool:
    """Whether delayq refused the call (a 4xx), rather than failing to answer it."""
    return isinstance(error, DelayqError) and 400 <= error.status < 500


def work(
    client: Client,
    topic: str,
    handler: Callable[[Job], object],
    *,
    concurrency: int = 1,
    count: int = 1,
    wait: float = 20,
    stop: Optional[threading.Event] = None,
    on_error: Optional[ErrorReporter] = None,
    retry_delay: float = 1.0,
) -> None:
    """See ``Client.work``."""
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency: give a whole number of loops >= 1, not {concurrency!r}")
    if not isinstance(count, int) or not 1 <= count <= 100:
        raise ValueError(f"count: give a whole number of jobs from 1 to 100, not {count!r}")
    if not 0 <= wait <= 20:
        raise ValueError(f"wait: give 0 to 20 seconds, not {wait!r}")
    stopping = stop if stop is not None else threading.Event()
    fatal: List[DelayqError] = []

    def report(error: BaseException, job: Optional[Job] = None) -> None:
        if on_error is not None:
            try:
                on_error(error, job)
            except Exception:  # the caller's reporter must not end the loop
                pass

    def report_refused(results: Sequence[FinishItemResult], jobs: Sequence[Job]) -> None:
        for result, job in zip(results, jobs):
            if "error" in result:
                error = result["error"]
                report(DelayqError(error["code"], 0, error["message"]), job)

    def keep_lease(job: Job, done: threading.Event) -> None:
        """Extends the job's lease every half of its TTR until ``done``; ends on a refusal."""
        every = max(0.5, job["ttr"] / 2)
        while not done.wait(every):
            try:
                client.touch(job["id"], receipt=job.get("receipt"))
            except DelayqError as error:
                report(error, job)
                if _refused(error):
                    return  # the lease is gone: what the handler finishes will be refused

    def run(job: Job) -> bool:
        done = threading.Event()
        keeper = threading.Thread(target=keep_lease, args=(job, done), daemon=True)
        keeper.start()
        try:
            handler(job)
            return True
        except Exception as error:
            report(error, job)
            try:
                client.release(job["id"], receipt=job.get("receipt"), error=_failure_text(error))
            except DelayqError as failed:
                report(failed, job)
            return False
        finally:
            done.set()
            keeper.join()

    def loop() -> None:
        held: List[Job] = []
        while not stopping.is_set():
            try:
                answer = client.finish_and_pop(topic, held, count=count, wait=0 if held else wait)
            except DelayqError as error:
                if _refused(error):
                    # The pop itself was refused (a token without this topic, a push topic):
                    # asking again will not help.
                    fatal.append(error)
                    stopping.set()
                    break
                # The finishes are tried again with the next pop: finishing twice answers the same.
                report(error)
                stopping.wait(retry_delay)
                continue
            report_refused(answer["finished"], held)
            held = []
            for job in answer["jobs"]:
                # Jobs reserved before a stop are still run: they are leased to this worker.
                if run(job):
                    held.append(job)
        if held:
            try:
                report_refused(client.finish_many(held), held)
            except DelayqError as error:
                report(error)

    loops = [threading.Thread(target=loop, daemon=True) for _ in range(concurrency)]
    for thread in loops:
        thread.start()
    try:
        for thread in loops:
            thread.join()
    except KeyboardInterrupt:
        # Ctrl-C: stop as stop.set() would, then let the handlers end and their jobs finish.
        stopping.set()
        for thread in loops:
            thread.join()
        raise
    if fatal:
        raise fatal[0]


_MAX_ERROR_BYTES = 1024


def _failure_text(error: BaseException) -> str:
    """What a handler raised, as a release's ``error`` (the job's lastError): its message (its
    class name when it has none), cut to 1 KiB with "…" at the cut."""
    text = str(error) or type(error).__name__
    if len(text.encode("utf-8")) <= _MAX_ERROR_BYTES:
        return text
    cut = text.encode("utf-8")[: _MAX_ERROR_BYTES - 3].decode("utf-8", "ignore")
    return cut + "…"
