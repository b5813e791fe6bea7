"""The driver (thesis 5.2.1): builds every role from one Config and moves data between them.

Synchronous schedule (Cleanba 4.2). At iteration i the rollout workers act
with parameter version v_{i-1} while the parameter optimizer turns batches
sampled from the data of iterations < i into version v_i; then priorities go
back to the replay buffer, the new trajectories are added, and v_i becomes
the workers' next version. Every batch therefore comes from known policy
versions, and the same seed and config give the same metrics on the inline
and the Ray backend. Checkpoints are taken only between iterations, so a
resumed run continues exactly where the stopped one was.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import sys
import time
from typing import NamedTuple

import numpy as np

from moozi._version import __version__
from moozi.runs.checkpoint import best_checkpoint, latest_checkpoint, load_checkpoint, save_best_checkpoint, save_checkpoint
from moozi.config import TESTING_WORKER_CPUS, Config, load_saved_config, resolve_rollout_workers, save_config
from moozi.core.replay import replay_bytes
from moozi.core.types import sub_state
from moozi.errors import MooziError
from moozi.evaluation.intervals import Z_95
from moozi.runs.metrics_log import MetricsLogger
from moozi.runs.summary import write_summary
from moozi.training.backends import RoleDiedError, make_backend
from moozi.training.stopping import StopRequests, limit_reached, run_until_stopped
from moozi.builders import env_spec
from moozi.training.roles.parameter_optimizer import ParameterOptimizer
from moozi.training.roles.replay import ReplayRole
from moozi.envs.registry import is_jax_native
from moozi.training.roles.anakin_self_play import AnakinRolloutWorker
from moozi.training.roles.reanalyze import ReanalyzeRolloutWorker
from moozi.training.roles.self_play import TrainingRolloutWorker
from moozi.training.roles.testing import TestingRolloutWorker


@dataclasses.dataclass
class Counters:
    iteration: int = 0
    updates: int = 0
    env_steps: int = 0
    episodes: int = 0
    tests: int = 0
    reanalyzed_steps: int = 0
    elapsed_seconds: float = 0.0  # training time summed over every invocation of the run

    def as_array(self) -> np.ndarray:
        return np.asarray(
            [self.iteration, self.updates, self.env_steps, self.episodes, self.tests, self.reanalyzed_steps],
            np.int64,
        )

    @classmethod
    def from_meta(cls, meta: dict) -> "Counters":
        return cls(**{f.name: meta["counters"][f.name] for f in dataclasses.fields(cls)})


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
        if not resume:
            # A misspelt or unsupported game, or a buffer too big for this machine, must fail before
            # anything is written, so a bad command leaves no half-made run directory behind.
            _check_replay_fits_here(config, env_spec(config))
        prepare_run_dir(self.run_dir, resume)
        if resume:
            config = resumed_config(self.run_dir, config)
        self._backend = make_backend(config.backend.kind, config.backend)
        try:
            # "auto" rollout workers: sized to the cluster (or machine), and saved as the number it became,
            # so a resumed run has the same workers whatever the cluster is then.
            config = resolve_rollout_workers(config, self._backend.cpus())
            self.config = config
            self.spec = env_spec(config)
            if resume:
                _check_replay_fits_here(config, self.spec)
            # Before any role starts: a run killed while its roles start up can still be resumed.
            save_config(config, self.run_dir / "config.json")
        except BaseException:
            self._backend.shutdown()
            raise
        self.progress = progress
        self.counters = Counters()
        self._stops = StopRequests(config.train)
        self._backend.interrupt = self._stops.interrupt_reason
        b = config.backend
        self.parameter_optimizer = self._backend.start(
            "parameter_optimizer", ParameterOptimizer, config, resources={"num_cpus": b.learner_cpus, "num_gpus": b.learner_gpus}
        )
        # The replay buffer's memory is reserved on the cluster with its CPUs: a node without room for
        # it refuses the run at placement, not by running out of memory an hour in.
        self.replay = self._backend.start("replay_buffer", ReplayRole, config, resources={
            "num_cpus": b.replay_cpus, "memory": int(replay_bytes(config.replay, self.spec))})
        self.workers = [
            self._backend.start(
                f"training_rollout_worker_{i}",
                training_worker_class(config),
                config,
                i,
                resources={"num_cpus": b.rollout_worker_cpus, "num_gpus": b.rollout_worker_gpus},
                group="rollout",
            )
            for i in range(config.train.num_training_workers)
        ]
        # Workers whose process (or node) was lost: each has a replacement starting, which joins the
        # rollouts once it is up (`_active_workers`); until then the run goes on with the others.
        self._lost: set[int] = set()
        self.tester = self._backend.start(
            "testing_rollout_worker", TestingRolloutWorker, config, resources={"num_cpus": TESTING_WORKER_CPUS}
        )
        self._restored_window = None
        self._best: dict | None = None  # `next_best`'s record of RUN/checkpoints/BEST
        self._last_test: dict | None = None  # the latest test of this invocation, with its update
        self._pending_test: _PendingTest | None = None  # the test in flight
        self.reanalyzer = None
        if config.train.reanalyze_fraction > 0:
            self.reanalyzer = self._backend.start(
                "reanalyze_rollout_worker", ReanalyzeRolloutWorker, config, resources={"num_cpus": b.rollout_worker_cpus},
                group="rollout",
            )
        try:
            # Every role placed at once, or none: a cluster too small for them refuses here, within
            # backend.placement_timeout_seconds, instead of leaving a role pending forever.
            self._backend.launch()
            self._record_placement()
        except BaseException:
            self._backend.shutdown()
            raise
        resume_step = None
        if resume:
            resume_step = self._restore()
        # A run that starts from the beginning owns its log: lines of an earlier attempt that
        # never reached a checkpoint would otherwise mix with its own (-1 drops every line).
        self.logger = MetricsLogger(self.run_dir, resume_from_step=-1 if resume_step is None else resume_step)

    def _record_placement(self) -> None:
        """Where the Ray backend placed each role: RUN/placement.json, and one line when it is more
        than one node."""
        placement = getattr(self._backend, "placement", None)
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
            room = resolve_rollout_workers(auto, self._backend.cpus()).train.num_training_workers
            if room > self.config.train.num_training_workers:
                print(f"the cluster has room for {room} training rollout workers, this run uses "
                      f"{self.config.train.num_training_workers}: --set train.num_training_workers=auto uses them all "
                      "(docs/cluster.md)", file=sys.stderr)

    # --- run directory and checkpoints ------------------------------------------------
    def _meta(self) -> dict:
        return {
            "game": self.spec.name,
            "moozi_version": __version__,
            "counters": dataclasses.asdict(self.counters),
        }

    def checkpoint(self, window: "_Window | None" = None) -> pathlib.Path:
        get = self._backend.get
        train_state = get(self.parameter_optimizer.call("get_state"))
        arrays = {f"replay/{k}": v for k, v in get(self.replay.call("state_dict")).items()}
        for i, state in self._worker_states():
            arrays.update({f"worker{i}/{k}": v for k, v in state.items()})
        meta = self._meta()
        if window is not None:
            # The metrics of updates since the last log line: a resumed run logs the same averages.
            meta["log_window"] = window.state()
        return save_checkpoint(
            self.run_dir, self.counters.updates, train_state=train_state, arrays=arrays, meta=meta,
            keep=self.config.train.keep_checkpoints,
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
        train_state = self._backend.get(tested.state)
        meta = {**tested.meta, "best": best, "test_metrics": test_metrics}
        save_best_checkpoint(self.run_dir, tested.update, train_state=train_state, meta=meta)

    def _restore(self) -> int | None:
        """Loads the latest checkpoint into every role; returns its step, or None when the run
        stopped before its first checkpoint (then it starts from the beginning)."""
        path = latest_checkpoint(self.run_dir)
        if path is None and not any(self.run_dir.glob("checkpoints/ckpt-*")):
            # Killed before its first checkpoint: nothing is lost by starting again, and
            # `--resume` keeps working after a kill at any moment.
            print(f"{self.run_dir} has no checkpoint yet: starting from the beginning", file=sys.stderr)
            return None
        if path is None:
            raise MooziError(f"cannot resume: {self.run_dir} has no complete checkpoint")
        template = self._backend.get(self.parameter_optimizer.call("get_state"))
        train_state, arrays, meta = load_checkpoint(
            path, train_state_template=template, expected_meta={"game": self.spec.name}
        )
        self._backend.get(self.parameter_optimizer.call("set_state", train_state))
        self._backend.get(self.replay.call("load_state_dict", sub_state(arrays, "replay/")))
        for i, worker in enumerate(self.workers):
            state = sub_state(arrays, f"worker{i}/")
            if state:  # absent when the worker had been lost at that checkpoint: it starts on fresh episodes
                self._backend.get(worker.call("load_state_dict", state))
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

        Each iteration: launch the update, the rollouts and reanalyze on
        parameter version v_{i-1}; collect them into the buffer; fetch v_i;
        then test, log and checkpoint when each is due.
        """
        try:
            return run_until_stopped(self)
        finally:
            self.logger.close()

    def _run(self, started: float) -> dict:
        counters, train = self.counters, self.config.train
        elapsed_before = counters.elapsed_seconds
        last_checkpoint = time.monotonic()
        window = _Window.from_state(self._restored_window)
        params = self._backend.get(self.parameter_optimizer.call("get_params"))
        ready = self._backend.get(self.replay.call("ready"))
        next_test = (counters.updates // train.test_every_updates + 1) * train.test_every_updates if train.test_every_updates else None
        last_metrics: dict[str, float] = {}
        while (reason := self._should_stop(started)) is None:
            t_iter = time.perf_counter()
            version = counters.updates
            params_ref = self._backend.put(params)
            pending = self._launch_iteration(params_ref, version, ready, window)
            ready = self._collect_iteration(pending, params_ref, version, window)
            t_params = time.perf_counter()
            params = self._backend.get(self.parameter_optimizer.call("get_params"))
            window.add("param_fetch_seconds", time.perf_counter() - t_params)
            counters.iteration += 1
            window.add("iteration_seconds", time.perf_counter() - t_iter)
            # The test launched an iteration ago has played beside this iteration: its result, then
            # the next test if one is due. A test never stops the loop, yet every test is taken up
            # at the same point of the run, so runs and resumed runs log the same rows in order.
            self._collect_test(last_metrics)
            if next_test is not None and counters.updates >= next_test:
                counters.elapsed_seconds = elapsed_before + time.monotonic() - started  # for BEST's meta
                self._launch_test(params)
                next_test += train.test_every_updates
            if window.updates >= train.log_every_updates or (not ready and window.iterations >= 10):
                self._log(window, started, last_metrics)
                window = _Window()
            if time.monotonic() - last_checkpoint >= 60 * train.checkpoint_every_minutes:
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
        summary = {**last_metrics, "stop_reason": reason, "checkpoint": str(path), **dataclasses.asdict(counters)}
        summary.update(self._summary_facts())
        write_summary(self.run_dir, summary)
        return summary

    def _launch_iteration(self, params_ref, version: int, ready: bool, window: "_Window") -> "_Pending":
        """Starts the iteration's calls: the update (once the buffer is ready), every training
        worker's rollout with version `version`, and reanalyze's share of trajectories."""
        train, backend = self.config.train, self._backend
        update = None
        if ready:
            batches = self.replay.call("sample_batches", train.updates_per_iteration, train.batch_size)
            update = self.parameter_optimizer.call("update", backend.resolve_arg(batches))
        active = self._active_workers()
        rollouts = {i: self.workers[i].call("run", params_ref, train.rollout_steps, version) for i in active}
        reanalyze = None
        if self.reanalyzer is not None and ready:
            fresh_steps = train.rollout_steps * self.config.env.num_envs * len(active)
            share = train.reanalyze_fraction / (1.0 - train.reanalyze_fraction)
            steps = int(round(share * fresh_steps))
            trajectories = self.replay.call("sample_trajectories", max(1, steps // max(self._mean_episode_length(window), 1)))
            reanalyze = self.reanalyzer.call("run", params_ref, backend.resolve_arg(trajectories))
        return _Pending(rollouts, update, reanalyze)

    def _collect_iteration(self, pending: "_Pending", params_ref, version: int, window: "_Window") -> bool:
        """Waits for the iteration's calls, feeds their results to the buffer and the counters;
        returns whether the buffer is ready to sample."""
        counters, get = self.counters, self._backend.get
        t_wait = time.perf_counter()
        results = self._rollout_results(pending.rollouts, params_ref, version)
        window.add("wait_rollout_seconds", time.perf_counter() - t_wait)
        if pending.update is not None:
            t_wait = time.perf_counter()
            update = get(pending.update)
            window.add("wait_learner_seconds", time.perf_counter() - t_wait)
            self.replay.call("update_priorities", update)
            counters.updates = update.version
            window.add_metrics(update.metrics, count=len(update.priorities))
            window.add("learner_seconds", update.seconds)
        if pending.reanalyze is not None:
            reanalysed = get(pending.reanalyze)
            steps = get(self.replay.call("replace_search_statistics", reanalysed))
            counters.reanalyzed_steps += steps
            window.add("reanalyzed_steps", steps)
        get(self.replay.call("add_rollouts", results))
        for result in results:
            counters.env_steps += result.env_steps
            counters.episodes += len(result.trajectories)
            window.add_rollout(result)
        return get(self.replay.call("ready"))

    def _launch_test(self, params) -> None:
        """Starts one run of the testing worker on the network the run's agent plays (`params`, the
        online one, or the target network); `_collect_test` takes up its result."""
        counters, train = self.counters, self.config.train
        if train.agent_network != "online":
            params = self._backend.get(self.parameter_optimizer.call("get_params", train.agent_network))
        seed = self.config.seed + 7919 * counters.tests
        metrics = self.tester.call("run", params, train.test_episodes, seed)
        # The tested state, should it become the best checkpoint: by the time the test ends the
        # learner has moved on. Calls to a role run in order, so this is the state after the update
        # the parameters came from.
        state = self.parameter_optimizer.call("get_state") if train.keep_best else None
        self._pending_test = _PendingTest(counters.updates, metrics, state, self._meta())

    def _collect_test(self, last_metrics: dict) -> None:
        """Waits for the test in flight, if any: logs it at the update it tested and keeps the tested
        parameters as the best if they are."""
        pending, self._pending_test = self._pending_test, None
        if pending is None:
            return
        test_metrics = self._backend.get(pending.metrics)
        self.counters.tests += 1
        self._last_test = {"update": pending.update, **test_metrics}
        self.logger.write(pending.update, test_metrics, role="test")
        last_metrics.update(test_metrics)
        if pending.state is not None:
            self._keep_if_best(test_metrics, pending)

    def _summary_facts(self) -> dict:
        """What `moozi.runs.summary.describe` needs beyond the counters and the last metrics."""
        best = best_checkpoint(self.run_dir)
        return {
            "run_dir": str(self.run_dir),
            "game": self.spec.name,
            "game_arg": self.config.game,
            "agent": self.config.agent,
            "two_player": self.spec.is_two_player,
            "last_test": self._last_test,
            "best_checkpoint": None if best is None else str(best),
            "test_episodes": self.config.train.test_episodes,
            "test_max_steps": self.config.train.test_max_steps,
        }

    def _log(self, window: "_Window", started: float, last_metrics: dict) -> None:
        """The window's summary and the buffer's statistics as one metrics row (and the progress line)."""
        metrics = window.summary(self.counters)
        metrics.update(self._backend.get(self.replay.call("stats")))
        self.logger.write(self.counters.updates, metrics)
        last_metrics.update(metrics)
        if self.progress:
            self._print_progress(started, last_metrics)

    def _rollout_results(self, futures: dict, params_ref, version) -> list:
        results = [self._worker_get(i, future) for i, future in futures.items()]
        return [r for r in results if r is not None]

    def _worker_get(self, i: int, future):
        """The value of training worker i's `future`, or None if the worker's process (or its node)
        died: what it had not returned is dropped whole, so no step is counted twice or half-written,
        and a replacement (same index, fresh envs) is started to rejoin when it is up."""
        try:
            return self._backend.get(future)
        except RoleDiedError as e:
            if e.role != self.workers[i].name:
                raise
            self._lose_worker(i)
            return None

    def _lose_worker(self, i: int) -> None:
        self._lost.add(i)
        alive = len(self.workers) - len(self._lost)
        print(f"\n{self.workers[i].name} died (its process or its node was lost): the run goes on with {alive} of "
              f"{len(self.workers)} training workers; a replacement joins when the cluster has room for it",
              file=sys.stderr)
        self.logger.write(self.counters.updates, {"training_workers_alive": alive, "training_worker_lost": i}, role="event")
        self.workers[i] = self._backend.restart(self.workers[i])

    def _active_workers(self) -> list[int]:
        """The training workers that take part in this iteration: every one that is up. Replacements
        of lost workers join once they are up; with none up at all the run waits for one (a stop
        request or backend.wait_timeout_seconds ends that wait)."""
        while True:
            for i in sorted(self._lost):
                try:
                    up = self._backend.is_ready(self.workers[i])
                except RoleDiedError as e:
                    print(f"\n{self.workers[i].name}'s replacement died while starting ({e}); starting another",
                          file=sys.stderr)
                    self.workers[i] = self._backend.restart(self.workers[i])
                    continue
                if up:
                    self._lost.discard(i)
                    print(f"\n{self.workers[i].name} is back: {len(self.workers) - len(self._lost)} of "
                          f"{len(self.workers)} training workers", file=sys.stderr)
                    self.logger.write(self.counters.updates, {"training_workers_alive": len(self.workers) - len(self._lost),
                                                              "training_worker_back": i}, role="event")
            active = [i for i in range(len(self.workers)) if i not in self._lost]
            if active:
                return active
            i = min(self._lost)
            try:
                self._backend.wait_ready(self.workers[i])
            except RoleDiedError:
                self.workers[i] = self._backend.restart(self.workers[i])

    def _worker_states(self):
        """(index, state) of every training worker that is up, for the checkpoint; a worker lost while
        answering is left out (on resume it starts on fresh episodes)."""
        active = [i for i in range(len(self.workers)) if i not in self._lost]
        futures = {i: self.workers[i].call("state_dict") for i in active}
        for i, future in futures.items():
            state = self._worker_get(i, future)
            if state is not None:
                yield i, state

    def _mean_episode_length(self, window) -> int:
        return int(window.mean("episode_length") or self.spec.max_episode_steps or 50)

    def _print_progress(self, started: float, metrics: dict) -> None:
        train = self.config.train
        elapsed = time.monotonic() - started
        fractions = []
        if train.max_minutes:
            fractions.append(elapsed / (60 * train.max_minutes))
        if train.max_env_steps:
            fractions.append(self.counters.env_steps / train.max_env_steps)
        eta = ""
        if fractions and max(fractions) > 0:
            remaining = elapsed * (1 - max(fractions)) / max(fractions)
            eta = f" ETA {_clock(max(remaining, 0))}"
        parts = [
            f"{_clock(elapsed)}{eta}",
            f"upd {self.counters.updates}",
            f"env {self.counters.env_steps}",
        ]
        for key, label in (
            ("total_loss", "loss"),
            ("episode_return", "return"),
            ("test_return", "test"),
            ("test_win_rate", "win"),
            ("env_steps_per_s", "env/s"),
        ):
            if key in metrics and metrics[key] is not None and math.isfinite(metrics[key]):
                parts.append(f"{label} {metrics[key]:.3g}")
        line = " | ".join(parts)
        end = "\r" if sys.stderr.isatty() else "\n"
        print(line.ljust(100), end=end, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._backend.kind == "inline" and self._pending_test is not None:
            # A stop that gave up on another role's wait, or an error, can leave a test playing on its
            # thread: end it at its next step rather than wait for all of it (Ray actors are killed).
            self.tester.obj.cancel()
        for handle in [*self.workers, self.tester, self.reanalyzer, self.parameter_optimizer, self.replay]:
            if handle is not None and self._backend.kind == "inline":
                handle.drain()
                close = getattr(handle.obj, "close", None)
                if close:
                    close()
        self._backend.shutdown()


class _Window:
    """Sums of metrics between two log lines (throughput, waits, losses)."""

    def __init__(self):
        self.start = time.perf_counter()
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.updates = 0
        self.iterations = 0
        self.env_steps = 0

    def state(self) -> dict:
        return {
            "sums": self.sums,
            "counts": self.counts,
            "updates": self.updates,
            "iterations": self.iterations,
            "env_steps": self.env_steps,
        }

    @classmethod
    def from_state(cls, state: dict | None) -> "_Window":
        window = cls()
        if state:
            window.sums = {k: float(v) for k, v in state["sums"].items()}
            window.counts = {k: int(v) for k, v in state["counts"].items()}
            window.updates, window.iterations, window.env_steps = state["updates"], state["iterations"], state["env_steps"]
        return window

    def add(self, key: str, value: float, count: int = 1) -> None:
        self.sums[key] = self.sums.get(key, 0.0) + float(value)
        self.counts[key] = self.counts.get(key, 0) + count
        if key == "iteration_seconds":
            self.iterations += 1

    def add_metrics(self, metrics: dict, count: int) -> None:
        self.updates += count
        for key, value in metrics.items():
            self.add(key, value * count, count)

    def add_rollout(self, result) -> None:
        self.env_steps += result.env_steps
        for key, value in result.metrics.items():
            if key in ("env_steps", "episodes"):
                continue
            self.add(key, value)

    def mean(self, key: str) -> float | None:
        return self.sums[key] / self.counts[key] if self.counts.get(key) else None

    def summary(self, counters: Counters) -> dict[str, float]:
        seconds = max(time.perf_counter() - self.start, 1e-9)
        out = {}
        for key in self.sums:
            if key.endswith("_seconds") or key == "reanalyzed_steps":
                out[key] = self.sums[key]
            else:
                out[key] = self.mean(key)
        out["env_steps_per_s"] = self.env_steps / seconds
        out["searches_per_s"] = self.env_steps / seconds  # one search per env step
        out["updates_per_s"] = self.updates / seconds
        out["env_steps"] = float(counters.env_steps)
        out["episodes"] = float(counters.episodes)
        out["policy_version"] = float(counters.updates)
        return out


# --- what every driver shares: the run directory and resuming (stopping: training/stopping.py) ---
def prepare_run_dir(run_dir: pathlib.Path, resume: bool) -> None:
    """Checks that `run_dir` can hold this run (or holds the run to resume) and is writable."""
    if resume and not (run_dir / "config.json").exists():
        raise MooziError(f"cannot resume: {run_dir} has no config.json (not a moozi run directory)")
    if not resume and (run_dir / "checkpoints").exists() and any((run_dir / "checkpoints").iterdir()):
        raise MooziError(f"{run_dir} already holds a run: pass --resume to continue it, or choose another --run-dir")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write_test"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as e:
        raise MooziError(f"run directory {run_dir} is not writable: {e.strerror or e}") from None


def resumed_config(run_dir: pathlib.Path, requested: Config) -> Config:
    """The saved config of the run to resume, with the requested stopping rules and backend:
    those may change on resume; everything that shapes learning may not."""
    saved = load_saved_config(run_dir / "config.json")
    return dataclasses.replace(saved, train=dataclasses.replace(
        saved.train, max_minutes=requested.train.max_minutes, max_env_steps=requested.train.max_env_steps
    ), backend=requested.backend)


def strength_score(test_metrics: dict, episodes: int) -> tuple[str | None, float, float]:
    """(name, score, standard error) of the in-training test that picks the best checkpoint:
    Connect Four's solver keeps-result rate (a fixed labelled set, so no game noise), else the
    score against the random player (win + draw / 2), else the mean return. The error of a rate
    comes from its logged 95% Wilson interval, which stays honest at 0 and 1."""
    if "test_solver_keeps_result" in test_metrics:
        half = (test_metrics["test_solver_keeps_result_ci_high"] - test_metrics["test_solver_keeps_result_ci_low"]) / 2
        return "test_solver_keeps_result", float(test_metrics["test_solver_keeps_result"]), half / Z_95
    if "test_win_rate" in test_metrics:
        score = test_metrics["test_win_rate"] + 0.5 * test_metrics.get("test_draw_rate", 0.0)
        half = (test_metrics["test_win_rate_ci_high"] - test_metrics["test_win_rate_ci_low"]) / 2
        return "test_score", float(score), half / Z_95
    if "test_return" in test_metrics:
        se = test_metrics.get("test_return_std", 0.0) / math.sqrt(max(episodes, 1))
        return "test_return", float(test_metrics["test_return"]), float(se)
    return None, 0.0, 0.0


def next_best(best: dict | None, name: str, score: float, se: float, update: int) -> dict | None:
    """The new best-checkpoint record, or None to keep `best`.

    The newest tested parameters become the best unless they are measurably worse (95%, the
    difference of two independent estimates) than the peak: the highest score tested so far.
    Keeping the single highest score instead would keep whichever early checkpoint the test's
    noise flattered (on Connect Four a 200-update checkpoint stayed "best" over a 1,300-update
    one that beat random 88 to 77 games); measuring against the peak, not the current best,
    keeps a slow decline from passing unnoticed one small step at a time.
    """
    peak = best["peak"] if best is not None and best["name"] == name else None
    if peak is not None and score < peak["score"] - Z_95 * math.hypot(se, peak["se"]):
        return None
    if peak is None or score > peak["score"]:
        peak = {"score": score, "se": se, "update": update}
    return {"name": name, "score": score, "se": se, "update": update, "peak": peak}


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def training_worker_class(config: Config) -> type:
    """The training rollout worker for the config's game: `AnakinRolloutWorker` for JAX-native
    games (the whole self-play segment is one jitted program), `TrainingRolloutWorker` otherwise."""
    return AnakinRolloutWorker if is_jax_native(config.game) else TrainingRolloutWorker


class _PendingTest(NamedTuple):
    """The in-training test in flight: the update it tests and its backend futures."""

    update: int
    metrics: object  # the testing worker's metrics
    state: object  # the learner's state at `update` (None: no best checkpoint is kept)
    meta: dict  # the run's checkpoint metadata at `update` (its counters then)


@dataclasses.dataclass
class _Pending:
    """The calls of one iteration in flight (backend futures)."""

    rollouts: dict  # training worker index -> its rollout's future
    update: object = None
    reanalyze: object = None


# Share of the memory available at start that the replay buffer may take: the rest is for the
# networks, the compiled programs, the envs, the rollouts in flight and everything else running.
REPLAY_MEMORY_SHARE = 0.7


def available_memory_bytes() -> int | None:
    """Memory available to new allocations (Linux's MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _check_replay_fits_here(config: Config, spec) -> None:
    if config.backend.ray_address is None:  # on a cluster the replay buffer may live on another node
        check_replay_fits(config, spec)


def check_replay_fits(config: Config, spec, available: int | None = None) -> None:
    """Refuses, before anything is allocated, a replay capacity that cannot fit in this machine's memory."""
    available = available_memory_bytes() if available is None else available
    if available is None:
        return
    need = replay_bytes(config.replay, spec)
    budget = REPLAY_MEMORY_SHARE * available
    if need <= budget:
        return
    capacity = config.replay.capacity
    fits = _largest_capacity_within(config.replay, spec, budget)
    raise MooziError(
        f"out of memory: replay.capacity={capacity:,} needs {need / 2**30:.1f} GiB for {spec.name} ({need / capacity:,.0f} bytes "
        f"per step), more than {REPLAY_MEMORY_SHARE:.0%} of the {available / 2**30:.1f} GiB of memory available; "
        f"set --set replay.capacity={fits} or less"
    )


def _largest_capacity_within(replay, spec, budget: float) -> int:
    """The largest capacity (a multiple of 1000 where one fits) whose buffer takes at most `budget` bytes;
    not proportional, as the priority trees round the capacity up to a power of two."""
    low, high = 0, replay.capacity
    while low < high:
        middle = (low + high + 1) // 2
        if replay_bytes(dataclasses.replace(replay, capacity=middle), spec) <= budget:
            low = middle
        else:
            high = middle - 1
    return low // 1000 * 1000 if low >= 1000 else low
