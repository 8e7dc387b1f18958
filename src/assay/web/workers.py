"""The web app's background work: model submissions played by the server, idle remote runs ended.

`POST /api/submissions` with a model agent (`openai:MODEL`) composes the submission and hands its
id to `Workers.play`; a daemon thread plays it (`submissions.execute`: claims its slots, plays,
records each run, completes it). Nothing is held here that the store does not also hold: a server
stopped mid-submission leaves its recorded runs stored and its other slots pending (its claims end
with its process), and `Workers.resume_pending` — run when the app starts — plays them again.
Several worker processes may do so at once: the claims split the work.

The sweeper ends remote runs left idle past their time limit (`remote.expire_idle`) every few
seconds, so a remote submission whose agent went away still completes; completes every batch whose
runs are all recorded but which was never completed (`completion.complete_recorded`: the request that
recorded its last run failed before finishing it, or the server stopped; a sweep looks at the
batches with a run recorded since the previous one, an index's range, and every
`FULL_SWEEP_EVERY`-th at all of them), so a submission whose
runs are all recorded always completes, however its finalisation was cut short; and scores the submissions
of trait suites whose runs are all recorded (`scoring.score_recorded`): scoring lags the runs, and
a submission is complete once judged.

One `Workers` per app (`for_app`), started by the submissions router's lifespan, or on first use
when the app runs without one (a `TestClient` outside `with`).
"""

from __future__ import annotations

import logging
import queue
import threading
from datetime import datetime
from typing import Any

from assay.store.db import Store
from assay.store.runs_repo import RunsRepo

log = logging.getLogger("assay.web")

#: Submissions played at once by one server process; each plays `RUNS_IN_FLIGHT` runs at a time.
THREADS = 2
RUNS_IN_FLIGHT = 8
#: Seconds between sweeps for idle remote runs.
SWEEP_SECONDS = 5.0
#: A sweep looks at the batches with a run recorded since the previous sweep began, less this
#: overlap (a transaction that committed late, another host's clock); every `FULL_SWEEP_EVERY`-th
#: sweep (the first included) looks at every batch, what a window could still miss.
SWEEP_OVERLAP_SECONDS = 600.0
FULL_SWEEP_EVERY = 60
#: The agents the server plays itself (the API composes only these).
SERVER_PLAYED = ("openai:",)

_GUARD = threading.Lock()


class Workers:
    def __init__(self, store: Store, *, threads: int = THREADS, sweep_seconds: float | None = SWEEP_SECONDS) -> None:
        from assay.store.faults import Retry, seconds_from_env

        # background work waits out a restart for the configured bound (`--store-retry`), though a
        # request gives up sooner (`app.REQUEST_RETRY_SECONDS`) and lets its client retry
        self.store = store.with_retry(Retry(seconds_from_env(), store.retry.clock, store.retry.sleep))
        self._todo: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._queued: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        self._threads = [threading.Thread(target=self._work, name="assay-submission", daemon=True)
                         for _ in range(threads)]
        for t in self._threads:
            t.start()
        self._sweeper: threading.Thread | None = None
        self._sweeps = 0
        self._swept_from: datetime | None = None  # when the last sweep of the batches that succeeded began
        self._unfinished: set[str] = set()  # batches whose completion failed: tried again each sweep
        if sweep_seconds:
            self._sweeper = threading.Thread(target=self._sweep, args=(sweep_seconds,), name="assay-sweeper",
                                             daemon=True)
            self._sweeper.start()

    def play(self, submission_id: str) -> None:
        """Play a composed submission in the background (once, however often it is asked)."""
        with self._lock:
            if submission_id in self._queued:
                return
            self._queued.add(submission_id)
            self._busy += 1
        self._todo.put(submission_id)

    def resume_pending(self) -> list[str]:
        """Queue every unfinished submission whose agent the server plays itself. Returns their ids."""
        from assay.service import batches
        from assay.service.actors import OPERATOR

        found = []
        for row in batches.list_submissions(self.store, actor=OPERATOR):
            if row.status != "pending" or row.n_recorded >= row.n_planned:
                continue
            agent = RunsRepo(self.store).batch_agent(row.id)
            if agent is not None and str(agent.load_spec).startswith(SERVER_PLAYED):
                found.append(row.id)
                self.play(row.id)
        return found

    def resume_in_background(self) -> None:
        """`resume_pending` on a thread of its own, so a server whose store is down at start serves
        (503s) at once instead of waiting out the store's retry bound first; `wait` counts it as
        work until it has queued what it found."""
        with self._lock:
            self._busy += 1

        def resume() -> None:
            try:
                self.resume_pending()
            except Exception as exc:  # noqa: BLE001 - a server that cannot resume still serves
                log.error("could not resume pending submissions: %s: %s", type(exc).__name__, exc)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._idle.notify_all()

        threading.Thread(target=resume, name="assay-resume", daemon=True).start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued or playing (tests); False if `timeout` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def close(self) -> None:
        """Stop taking work. A submission being played goes on to its end on its daemon thread, or
        stops with the process: what it did not record stays pending for the next start."""
        self._stop.set()
        for _ in self._threads:
            self._todo.put(None)

    def _work(self) -> None:
        from assay.service import scoring, submissions

        while True:
            submission_id = self._todo.get()
            if submission_id is None:
                return
            try:
                if not self._stop.is_set():
                    submissions.execute(self.store, submission_id, workers=RUNS_IN_FLIGHT)
                    scoring.score_recorded(self.store, [submission_id], on_error=_judge_failed)
            except Exception as exc:  # noqa: BLE001 - logged; the slots stay pending for a resume
                log.error("submission %s: background play stopped: %s: %s", submission_id, type(exc).__name__, exc)
            finally:
                with self._lock:
                    self._queued.discard(submission_id)
                    self._busy -= 1
                    self._idle.notify_all()

    def _sweep(self, seconds: float) -> None:
        while not self._stop.wait(seconds):
            self.sweep()

    def sweep(self) -> None:
        """One sweep: idle remote runs ended, batches whose runs are all recorded completed (a
        finalisation that failed or was cut short is done again until it is done), recorded
        submissions judged. A failure is logged and the next sweep tries again."""
        from assay.service import completion, remote, scoring

        try:
            remote.expire_idle(self.store)
        except Exception as exc:  # noqa: BLE001 - a missed sweep is retried
            log.warning("sweep for idle remote runs failed: %s: %s", type(exc).__name__, exc)
        from datetime import timedelta

        from assay.store.schema import utcnow

        began, failed = utcnow(), set()

        def on_error(batch_id: str, exc: Exception) -> None:
            failed.add(batch_id)
            _completion_failed(batch_id, exc)

        # 0021: the batches with a run recorded lately (indexed), not every batch, but now and then
        since = self._swept_from
        if since is not None and self._sweeps % FULL_SWEEP_EVERY != 0:
            since -= timedelta(seconds=SWEEP_OVERLAP_SECONDS)
        else:
            since = None
        self._sweeps += 1
        try:
            completion.complete_recorded(self.store, on_error=on_error, since=since, also=sorted(self._unfinished))
            self._swept_from, self._unfinished = began, failed
        except Exception as exc:  # noqa: BLE001 - a missed sweep is retried
            log.warning("sweep for recorded batches failed: %s: %s", type(exc).__name__, exc)
        try:
            scoring.score_recorded(self.store, on_error=_judge_failed)  # remote submissions, too
        except Exception as exc:  # noqa: BLE001 - a missed sweep is retried
            log.warning("sweep for submissions to judge failed: %s: %s", type(exc).__name__, exc)


def _completion_failed(batch_id: str, exc: Exception) -> None:
    log.warning("batch %s: completion deferred to the next sweep: %s: %s", batch_id, type(exc).__name__, exc)


def _judge_failed(submission_id: str, exc: Exception) -> None:
    log.warning("submission %s: scoring deferred: %s: %s", submission_id, type(exc).__name__, exc)


def for_app(app: Any) -> Workers:
    """The app's `Workers`, started on first use if its lifespan did not start them."""
    found = getattr(app.state, "workers", None)
    if found is not None:
        return found
    with _GUARD:
        found = getattr(app.state, "workers", None)
        if found is None:
            # no sweeper: without a lifespan nothing would ever stop it
            found = app.state.workers = Workers(app.state.store, sweep_seconds=None)
        return found
