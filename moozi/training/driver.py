"""The driver (thesis 5.2.1): one for every agent kind. It owns what every moozi run has: the run
directory with its config, metrics.jsonl and TensorBoard logs, checkpoints that resume exactly, the
in-training tests and the best checkpoint, the stopping rules and signals, the progress line and the
end-of-run summary. The agent kind plugs in its training loop (loop.py): `SearchLoop` for MuZero and
AlphaZero (search_loop.py: self-play, replay, reanalyze and the parameter optimizer as roles),
`ActorCriticLoop` for PPO and IMPALA (actor_critic_loop.py).

Checkpoints are taken only between iterations, so a resumed run continues exactly where the stopped
one was; each holds the metrics window in progress, so a resumed run logs the same rows.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
import time
from typing import Any, NamedTuple

from moozi._version import __version__
from moozi.builders import is_actor_critic
from moozi.config import Config, load_saved_config, resolve_rollout_workers
from moozi.errors import MooziError
from moozi.runs.checkpoint import best_checkpoint, latest_checkpoint, load_checkpoint, save_best_checkpoint, save_checkpoint
from moozi.runs.metrics_log import MetricsLogger
from moozi.runs.run_dir import prepare_run_dir, resumed_config
from moozi.runs.summary import write_summary
from moozi.training.actor_critic_loop import ActorCriticLoop
from moozi.training.backends import WaitInterrupted
from moozi.training.best_checkpoint import next_best, strength_score
from moozi.training.counters import Counters
from moozi.training.device import select_device
from moozi.training.loop import TestCall, TrainingLoop
from moozi.training.metrics_window import MetricsWindow, print_progress, remaining_seconds
from moozi.training.search_loop import SearchLoop
from moozi.training.stopping import StopRequests, limit_reached, run_progress, run_until_stopped


def loop_class(config: Config) -> type[TrainingLoop]:
    """The training loop of the config's agent kind."""
    return ActorCriticLoop if is_actor_critic(config) else SearchLoop


class Driver:
    def __init__(
        self,
        config: Config,
        run_dir: str | pathlib.Path,
        *,
        resume: bool = False,
        progress: bool = True,
    ):
        self.run_dir = pathlib.Path(run_dir)
        if resume and (self.run_dir / "config.json").exists():
            # A resumed run keeps its saved agent, whatever the command line's config says.
            config = dataclasses.replace(config, agent=load_saved_config(self.run_dir / "config.json").agent)
        kind = loop_class(config)
        kind.check_before_run_dir(config, resume)
        # Before the loop builds its parameters: they are made on the default device (moozi/training/device.py).
        self.device = select_device(config.backend)
        prepare_run_dir(self.run_dir, resume)
        if resume:
            config = resumed_config(self.run_dir, config)
        self.progress = progress
        self.counters = Counters()
        self._stops = StopRequests(config.train)
        self.loop: TrainingLoop = kind(config, self.run_dir, interrupt=self._stops.interrupt_reason, resume=resume)
        self.config, self.spec = self.loop.config, self.loop.spec
        self.loop.log_event = lambda row: self.logger.write(self.counters.updates, row, role="event")
        self._restored_window = None
        self._best: dict | None = None  # `next_best`'s record of RUN/checkpoints/BEST
        self._last_test: dict | None = None  # the latest test of this invocation, with its update
        self._pending_test: _PendingTest | None = None  # the test in flight
        self._dropped_test: _PendingTest | None = None  # a test given up at a stop (`_collect_test`)
        try:
            self._record_placement()
            resume_step = self._restore() if resume else None
        except BaseException:
            self.loop.close(test_in_flight=False)
            raise
        # A run that starts from the beginning owns its log: lines of an earlier attempt that
        # never reached a checkpoint would otherwise mix with its own (-1 drops every line).
        self.logger = MetricsLogger(self.run_dir, resume_from_step=-1 if resume_step is None else resume_step)

    def _record_placement(self) -> None:
        """Where the Ray backend placed each role: RUN/placement.json, and one line when it is more
        than one node."""
        placement = getattr(self.loop.backend, "placement", None)
        if placement is None:
            return
        where = placement()
        nodes = sorted(set(where.values()))
        (self.run_dir / "placement.json").write_text(json.dumps({"roles": where, "nodes": nodes}, indent=1))
        if len(nodes) > 1:
            counts = ", ".join(f"{node[:8]}: {sum(v == node for v in where.values())}" for node in nodes)
            print(f"roles on {len(nodes)} Ray nodes ({counts}; RUN/placement.json)", file=sys.stderr)
        if self.config.backend.ray_address:
            auto = dataclasses.replace(self.config, train=dataclasses.replace(self.config.train, num_training_workers="auto"))
            room = resolve_rollout_workers(auto, self.loop.backend.cpus()).train.num_training_workers
            if room > self.config.train.num_training_workers:
                print(f"the cluster has room for {room} training rollout workers, this run uses "
                      f"{self.config.train.num_training_workers}: --set train.num_training_workers=auto uses them all "
                      "(docs/cluster.md)", file=sys.stderr)

    # --- run directory and checkpoints ------------------------------------------------
    def _meta(self) -> dict:
        return {
            "game": self.spec.name,
            "agent": self.config.agent,
            "moozi_version": __version__,
            "counters": dataclasses.asdict(self.counters),
        }

    def checkpoint(self, window: MetricsWindow | None = None) -> pathlib.Path:
        meta = self._meta()
        if window is not None:
            # The metrics of updates since the last log line: a resumed run logs the same averages.
            meta["log_window"] = window.state()
        return save_checkpoint(
            self.run_dir, self.counters.updates, train_state=self.loop.train_state(), arrays=self.loop.state_arrays(),
            meta=meta, keep=self.config.train.keep_checkpoints,
        )

    def _keep_if_best(self, test_metrics: dict, tested: "_PendingTest") -> None:
        """Saves the tested parameters (the learner's state at the tested update) as the best
        checkpoint unless they test measurably worse than the best test so far (`next_best`)."""
        name, score, se = strength_score(test_metrics, self.config.train.test_episodes)
        if name is None:
            return
        best = next_best(self._best, name, score, se, tested.update)
        if best is None:
            return
        self._best = best
        meta = {**tested.meta, "best": best, "test_metrics": test_metrics}
        save_best_checkpoint(self.run_dir, tested.update, train_state=self.loop.get(tested.call.state), meta=meta)

    def _restore(self) -> int | None:
        """Loads the latest checkpoint into the loop; returns its step, or None when the run
        stopped before its first checkpoint (then it starts from the beginning)."""
        path = latest_checkpoint(self.run_dir)
        if path is None and not any(self.run_dir.glob("checkpoints/ckpt-*")):
            # Killed before its first checkpoint: nothing is lost by starting again, and
            # `--resume` keeps working after a kill at any moment.
            print(f"{self.run_dir} has no checkpoint yet: starting from the beginning", file=sys.stderr)
            return None
        if path is None:
            raise MooziError(f"cannot resume: {self.run_dir} has no complete checkpoint")
        train_state, arrays, meta = load_checkpoint(
            path, train_state_template=self.loop.train_state(), expected_meta={"game": self.spec.name}
        )
        self.loop.restore(train_state, arrays)
        self.counters = Counters.from_meta(meta)
        self._restored_window = meta.get("log_window")
        best = best_checkpoint(self.run_dir)
        if best is not None:
            self._best = json.loads((best / "meta.json").read_text()).get("best")
        return self.counters.updates

    # --- the loop ----------------------------------------------------------------------
    def _should_stop(self, started: float) -> str | None:
        return self._stops.reason or limit_reached(self.config.train, self.counters, started)

    def run(self) -> dict:
        """Iterations until a stop condition; returns the last metrics, the stop reason and the counters.

        Each iteration: the loop's acting and learning; then test, log and checkpoint when each is due.
        """
        try:
            return run_until_stopped(self)
        finally:
            self.logger.close()

    def _run(self, started: float) -> dict:
        counters, train = self.counters, self.config.train
        elapsed_before = counters.elapsed_seconds
        last_checkpoint = time.monotonic()
        window = MetricsWindow.from_state(self._restored_window)
        next_test = (counters.updates // train.test_every_updates + 1) * train.test_every_updates if train.test_every_updates else None
        last_metrics: dict[str, float] = {}
        while (reason := self._should_stop(started)) is None:
            steps_before = counters.env_steps
            ready = self.loop.iteration(counters, window, run_progress(train, counters, started, elapsed_before))
            counters.iteration += 1
            # A test launched an iteration ago has played beside this iteration: its result, then
            # the next test if one is due. A test never stops the loop, yet every test is taken up
            # at the same point of the run, so runs and resumed runs log the same rows in order.
            self._collect_test(last_metrics)
            if next_test is not None and counters.updates >= next_test and self._dropped_test is None:
                counters.elapsed_seconds = elapsed_before + time.monotonic() - started  # for BEST's meta
                self._launch_test()
                if not self.loop.tests_in_background:
                    self._collect_test(last_metrics)
                next_test = (counters.updates // train.test_every_updates + 1) * train.test_every_updates
            if window.updates >= train.log_every_updates or (not ready and window.iterations >= 10):
                self._log(window, started, last_metrics)
                window = MetricsWindow()
            at_mark = any(steps_before < n <= counters.env_steps for n in train.checkpoint_at_env_steps)
            if at_mark or time.monotonic() - last_checkpoint >= 60 * train.checkpoint_every_minutes:
                self._collect_test(last_metrics)  # a checkpoint holds every test launched before it
                counters.elapsed_seconds = elapsed_before + time.monotonic() - started
                self.checkpoint(window)
                last_checkpoint = time.monotonic()
        self._collect_test(last_metrics)
        counters.elapsed_seconds = elapsed_before + time.monotonic() - started
        path = self.checkpoint(window)
        if self.progress:
            print(file=sys.stderr)
        self.logger.flush()
        summary = {**last_metrics, "stop_reason": reason, "checkpoint": str(path), **dataclasses.asdict(counters),
                   "test_dropped_at_stop": None if self._dropped_test is None else self._dropped_test.update}
        summary.update(self._summary_facts())
        write_summary(self.run_dir, summary)
        return summary

    def _launch_test(self) -> None:
        """Starts one in-training test of the network the run's agent plays; `_collect_test` takes up
        its result."""
        counters = self.counters
        call = self.loop.launch_test(self.config.seed + 7919 * counters.tests, keep_state=self.config.train.keep_best)
        self._pending_test = _PendingTest(counters.updates, call, self._meta())

    def _collect_test(self, last_metrics: dict) -> None:
        """Waits for the test in flight, if any: logs it at the update it tested and keeps the tested
        parameters as the best if they are."""
        pending = self._pending_test
        if pending is None:
            return
        try:
            test_metrics = self.loop.get(pending.call.metrics)
        except WaitInterrupted as e:
            # A stop came and the test has not ended within its grace (a long game, as backgammon's,
            # can play for minutes). The test is dropped, not the iteration: the run's last iteration
            # is checkpointed as after any stop, given a grace of its own for the roles to answer.
            self._pending_test, self._dropped_test = None, pending
            self.loop.cancel_test()
            print(f"\n{e.reason}: the in-training test of update {pending.update} was still playing; it is "
                  "dropped and the run's last iteration is checkpointed", file=sys.stderr)
            self._stops.grant_grace()
            return
        self._pending_test = None
        self.counters.tests += 1
        self._last_test = {"update": pending.update, **test_metrics}
        self.logger.write(pending.update, test_metrics, role="test")
        last_metrics.update(test_metrics)
        if pending.call.state is not None:
            self._keep_if_best(test_metrics, pending)

    def _summary_facts(self) -> dict:
        """What `moozi.runs.summary.describe` needs beyond the counters and the last metrics."""
        best = best_checkpoint(self.run_dir)
        return {
            "run_dir": str(self.run_dir),
            "game": self.spec.name,
            "game_arg": self.config.game,
            "agent": self.config.agent,
            "device": self.device,
            "two_player": self.spec.is_two_player,
            "last_test": self._last_test,
            "best_checkpoint": None if best is None else str(best),
            "test_episodes": self.config.train.test_episodes,
            "test_max_steps": self.config.train.test_max_steps,
        }

    def _log(self, window: MetricsWindow, started: float, last_metrics: dict) -> None:
        """The loop's metrics row for the window (and the progress line)."""
        metrics = self.loop.log_metrics(window, self.counters)
        self.logger.write(self.counters.updates, metrics)
        last_metrics.update(metrics)
        if self.progress:
            elapsed = time.monotonic() - started
            remaining = remaining_seconds(self.config.train, self.counters, elapsed)
            print_progress(elapsed, self.counters, last_metrics, remaining)

    def close(self) -> None:
        self.loop.close(test_in_flight=self._pending_test is not None or self._dropped_test is not None)


class _PendingTest(NamedTuple):
    """The in-training test in flight: the update it tests, its call and the run's checkpoint metadata
    at that update (its counters then)."""

    update: int
    call: TestCall
    meta: dict[str, Any]
