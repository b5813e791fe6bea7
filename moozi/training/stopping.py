"""Stopping a run, shared by every driver: SIGINT/SIGTERM and the limits (--max-minutes,
--max-env-steps) end the loop between iterations; a wait on roles that do not answer within
train.stop_grace_seconds of the request is given up (`StopRequests.interrupt_reason`, polled by the
backend's `get`) and the run ends on its last checkpoint (`interrupted_summary`)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import signal
import sys
import time

from moozi.runs.checkpoint import latest_checkpoint
from moozi.runs.summary import write_summary
from moozi.training.backends import WaitInterrupted


def install_stop_signals(request_stop) -> dict:
    """SIGINT and SIGTERM call `request_stop("signal NAME")` (the loop then stops between iterations and
    writes its checkpoint); returns the previous handlers for `restore_signals`."""
    previous = {}

    def handler(signum, frame):
        request_stop(f"signal {signal.Signals(signum).name}")

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    return previous


class StopRequests:
    """Stop requests of a run: a signal stops the loop after the iteration in flight, which then writes
    its checkpoint. Should that iteration not end within train.stop_grace_seconds (a slow or lost
    role), or past --max-minutes by as much, or on a second signal, the backend's waits give up
    (`interrupt_reason`, polled by `backend.get`) and the last checkpoint written stays the run's last.
    A slow or lost role thus never keeps a run from stopping."""

    def __init__(self, train):
        self.grace = train.stop_grace_seconds
        self.max_minutes = train.max_minutes
        self.reason: str | None = None
        self._requested_at: float | None = None
        self._deadline: float | None = None  # time.monotonic() at which --max-minutes is reached

    def request(self, reason: str) -> None:
        now = time.monotonic()
        if self._requested_at is not None:
            now -= self.grace  # a second signal: stop waiting at once
        self.reason, self._requested_at = reason, now

    def arm(self, started: float) -> None:
        self._deadline = None if self.max_minutes is None else started + 60 * self.max_minutes

    def grant_grace(self) -> None:
        """A new grace from now for the waits still to come (the final checkpoint, after a wait was given
        up on the in-training test, a role that may be slow without holding the others up)."""
        now = time.monotonic()
        if self._requested_at is not None:
            self._requested_at = now
        if self._deadline is not None:
            self._deadline = now  # past --max-minutes: the waits give up a grace from now

    def disarm(self) -> None:
        self._deadline = None

    def interrupt_reason(self) -> str | None:
        """Why a wait on the roles should be given up now, if it should."""
        now = time.monotonic()
        if self._requested_at is not None and now - self._requested_at >= self.grace:
            return self.reason
        if self._deadline is not None and now >= self._deadline + self.grace:
            return "max_minutes"
        return None


def run_until_stopped(driver) -> dict:
    """`driver._run(started)` with the stop signals installed and its stop requests armed (`StopRequests`);
    a wait given up on a stop request ends the run with `interrupted_summary`."""
    previous = install_stop_signals(driver._stops.request)
    started = time.monotonic()
    driver._stops.arm(started)
    try:
        return driver._run(started)
    except WaitInterrupted as e:
        return interrupted_summary(driver.run_dir, e, driver.counters, driver._summary_facts(), driver.logger)
    finally:
        driver._stops.disarm()
        restore_signals(previous)


def interrupted_summary(run_dir: pathlib.Path, error: WaitInterrupted, counters, facts: dict, logger) -> dict:
    """The end of a run stopped while a role had not answered: the iteration in flight is dropped (its
    calls may have changed some roles' state but not others'), so the last checkpoint on disk, taken
    between two iterations, stays the run's last and --resume continues from it. The summary gives
    that checkpoint's counters: what the run has."""
    path = latest_checkpoint(run_dir)
    kept = "no checkpoint was written yet" if path is None else f"the last checkpoint {path} is kept"
    print(f"\n{error}: the iteration in flight is dropped; {kept}", file=sys.stderr)
    logger.flush()
    kept_counters = json.loads((path / "meta.json").read_text())["counters"] if path is not None else {}
    summary = {**dataclasses.asdict(counters), **kept_counters, "stop_reason": error.reason,
               "interrupted_while_waiting_for": error.waiting_for, "checkpoint": None if path is None else str(path),
               "updates_since_checkpoint_dropped": counters.updates - kept_counters.get("updates", 0), **facts}
    write_summary(run_dir, summary)
    return summary


def restore_signals(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def limit_reached(train, counters, started: float) -> str | None:
    """The stopping rule the run has reached, if any (`started`: this invocation's time.monotonic())."""
    if train.max_env_steps is not None and counters.env_steps >= train.max_env_steps:
        return "max_env_steps"
    if train.max_minutes is not None and time.monotonic() - started >= 60 * train.max_minutes:
        return "max_minutes"
    return None


def run_progress(train, counters, started: float, elapsed_before: float = 0.0) -> float:
    """The share of the run's planned length done, 0 to 1: the larger of the shares of --max-env-steps
    (over the whole run) and of the run's minutes, where a run resumed after `elapsed_before` seconds
    of training plans those seconds plus --max-minutes (this invocation's limit, as `limit_reached`
    counts it); 0 without either limit. optimizer.decay_over="run" decays the learning rate over it,
    so a run resumed with the minutes it had left continues its schedule where it stopped, and one
    given more minutes stretches what is left of it, never climbing back towards the peak."""
    shares = [0.0]
    if train.max_env_steps is not None:
        shares.append(counters.env_steps / train.max_env_steps)
    if train.max_minutes is not None:
        done = elapsed_before + time.monotonic() - started
        shares.append(done / (elapsed_before + 60 * train.max_minutes))
    return min(max(shares), 1.0)
