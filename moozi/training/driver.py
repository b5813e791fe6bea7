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
import pathlib
import sys
import time
from typing import NamedTuple

from moozi._version import __version__
from moozi.builders import env_spec
from moozi.config import TESTING_WORKER_CPUS, Config, resolve_rollout_workers, save_config
from moozi.core.replay import replay_bytes
from moozi.core.train_step import TrainState, decays_over_run
from moozi.core.types import sub_state
from moozi.envs.registry import is_jax_native
from moozi.errors import MooziError
from moozi.runs.checkpoint import best_checkpoint, latest_checkpoint, load_checkpoint, save_best_checkpoint, save_checkpoint
from moozi.runs.metrics_log import MetricsLogger
from moozi.runs.run_dir import prepare_run_dir, resumed_config
from moozi.runs.summary import write_summary
from moozi.training.backends import Call, RoleDiedError, make_backend
from moozi.training.best_checkpoint import next_best, strength_score
from moozi.training.counters import Counters
from moozi.training.device import select_device
from moozi.training.episodes import RolloutResult
from moozi.training.metrics_window import MetricsWindow, print_progress, remaining_seconds
from moozi.training.replay_memory import check_replay_fits_here
from moozi.training.roles import TrainingWorker
from moozi.training.roles.anakin_self_play import AnakinRolloutWorker
from moozi.training.roles.parameter_optimizer import ParameterOptimizer, UpdateResult
from moozi.training.roles.reanalyze import ReanalyzeRolloutWorker
from moozi.training.roles.replay import ReplayRole
from moozi.training.roles.self_play import TrainingRolloutWorker
from moozi.training.roles.testing import TestingRolloutWorker
from moozi.training.stopping import StopRequests, limit_reached, run_progress, run_until_stopped


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
            check_replay_fits_here(config, env_spec(config))
        # Before any role builds its parameters: they are made on the default device (moozi/training/device.py).
        self.device = select_device(config.backend)
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
                check_replay_fits_here(config, self.spec)
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

    def checkpoint(self, window: "MetricsWindow | None" = None) -> pathlib.Path:
        get = self._backend.get
        train_state = get(self.parameter_optimizer.call(ParameterOptimizer.get_state))
        arrays = {f"replay/{k}": v for k, v in get(self.replay.call(ReplayRole.state_dict)).items()}
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
        template = self._backend.get(self.parameter_optimizer.call(ParameterOptimizer.get_state))
        train_state, arrays, meta = load_checkpoint(
            path, train_state_template=template, expected_meta={"game": self.spec.name}
        )
        self._backend.get(self.parameter_optimizer.call(ParameterOptimizer.set_state, train_state))
        self._backend.get(self.replay.call(ReplayRole.load_state_dict, sub_state(arrays, "replay/")))
        for i, worker in enumerate(self.workers):
            state = sub_state(arrays, f"worker{i}/")
            if state:  # absent when the worker had been lost at that checkpoint: it starts on fresh episodes
                self._backend.get(worker.call(TrainingWorker.load_state_dict, state))
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
        self._started = started
        if decays_over_run(self.config.optimizer) and train.max_env_steps is None and train.max_minutes is None:
            print("moozi: optimizer.decay_over='run' without --max-env-steps or --max-minutes: the run has no "
                  "planned length, so the learning rate stays at its peak", file=sys.stderr)
        elapsed_before = counters.elapsed_seconds
        last_checkpoint = time.monotonic()
        window = MetricsWindow.from_state(self._restored_window)
        params = self._backend.get(self.parameter_optimizer.call(ParameterOptimizer.get_params))
        ready = self._backend.get(self.replay.call(ReplayRole.ready))
        next_test = (counters.updates // train.test_every_updates + 1) * train.test_every_updates if train.test_every_updates else None
        last_metrics: dict[str, float] = {}
        while (reason := self._should_stop(started)) is None:
            t_iter = time.perf_counter()
            version = counters.updates
            params_ref = self._backend.put(params)
            pending = self._launch_iteration(params_ref, version, ready, window)
            ready = self._collect_iteration(pending, params_ref, version, window)
            t_params = time.perf_counter()
            params = self._backend.get(self.parameter_optimizer.call(ParameterOptimizer.get_params))
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
                window = MetricsWindow()
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

    def _launch_iteration(self, params_ref, version: int, ready: bool, window: "MetricsWindow") -> "_Pending":
        """Starts the iteration's calls: the update (once the buffer is ready), every training
        worker's rollout with version `version`, and reanalyze's share of trajectories."""
        train, backend = self.config.train, self._backend
        update = None
        if ready:
            batches = self.replay.call(ReplayRole.sample_batches, train.updates_per_iteration, train.batch_size)
            update = self.parameter_optimizer.call(ParameterOptimizer.update, backend.resolve_arg(batches),
                                                   run_progress(train, self.counters, self._started))
        active = self._active_workers()
        rollouts = {i: self.workers[i].call(TrainingWorker.run, params_ref, train.rollout_steps, version) for i in active}
        reanalyze = None
        if self.reanalyzer is not None and ready:
            fresh_steps = train.rollout_steps * self.config.env.num_envs * len(active)
            share = train.reanalyze_fraction / (1.0 - train.reanalyze_fraction)
            steps = int(round(share * fresh_steps))
            count = max(1, steps // max(self._mean_episode_length(window), 1))
            trajectories = self.replay.call(ReplayRole.sample_trajectories, count)
            reanalyze = self.reanalyzer.call(ReanalyzeRolloutWorker.run, params_ref, backend.resolve_arg(trajectories))
        return _Pending(rollouts, update, reanalyze)

    def _collect_iteration(self, pending: "_Pending", params_ref, version: int, window: "MetricsWindow") -> bool:
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
            self.replay.call(ReplayRole.update_priorities, update)
            counters.updates = update.version
            window.add_metrics(update.metrics, count=len(update.priorities))
            window.add("learner_seconds", update.seconds)
        if pending.reanalyze is not None:
            reanalysed = get(pending.reanalyze)
            steps = get(self.replay.call(ReplayRole.replace_search_statistics, reanalysed))
            counters.reanalyzed_steps += steps
            window.add("reanalyzed_steps", steps)
        get(self.replay.call(ReplayRole.add_rollouts, results))
        for result in results:
            counters.env_steps += result.env_steps
            counters.episodes += len(result.trajectories)
            window.add_rollout(result)
        return get(self.replay.call(ReplayRole.ready))

    def _launch_test(self, params) -> None:
        """Starts one run of the testing worker on the network the run's agent plays (`params`, the
        online one, or the target network); `_collect_test` takes up its result."""
        counters, train = self.counters, self.config.train
        if train.agent_network != "online":
            params = self._backend.get(self.parameter_optimizer.call(ParameterOptimizer.get_params, train.agent_network))
        seed = self.config.seed + 7919 * counters.tests
        metrics = self.tester.call(TestingRolloutWorker.run, params, train.test_episodes, seed)
        # The tested state, should it become the best checkpoint: by the time the test ends the
        # learner has moved on. Calls to a role run in order, so this is the state after the update
        # the parameters came from.
        state = self.parameter_optimizer.call(ParameterOptimizer.get_state) if train.keep_best else None
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
            "device": self.device,
            "two_player": self.spec.is_two_player,
            "last_test": self._last_test,
            "best_checkpoint": None if best is None else str(best),
            "test_episodes": self.config.train.test_episodes,
            "test_max_steps": self.config.train.test_max_steps,
        }

    def _log(self, window: "MetricsWindow", started: float, last_metrics: dict) -> None:
        """The window's summary and the buffer's statistics as one metrics row (and the progress line)."""
        metrics = window.summary(self.counters, searches=True)
        metrics.update(self._backend.get(self.replay.call(ReplayRole.stats)))
        self.logger.write(self.counters.updates, metrics)
        last_metrics.update(metrics)
        if self.progress:
            elapsed = time.monotonic() - started
            remaining = remaining_seconds(self.config.train, self.counters, elapsed)
            print_progress(elapsed, self.counters, last_metrics, remaining)

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
        futures = {i: self.workers[i].call(TrainingWorker.state_dict) for i in active}
        for i, future in futures.items():
            state = self._worker_get(i, future)
            if state is not None:
                yield i, state

    def _mean_episode_length(self, window) -> int:
        return int(window.mean("episode_length") or self.spec.max_episode_steps or 50)

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


def training_worker_class(config: Config) -> type[TrainingWorker]:
    """The training rollout worker for the config's game: `AnakinRolloutWorker` for JAX-native
    games (the whole self-play segment is one jitted program), `TrainingRolloutWorker` otherwise."""
    return AnakinRolloutWorker if is_jax_native(config.game) else TrainingRolloutWorker


class _PendingTest(NamedTuple):
    """The in-training test in flight: the update it tests and its backend futures."""

    update: int
    metrics: Call[dict[str, float]]  # the testing worker's metrics
    state: Call[TrainState] | None  # the learner's state at `update` (None: no best checkpoint is kept)
    meta: dict  # the run's checkpoint metadata at `update` (its counters then)


@dataclasses.dataclass
class _Pending:
    """The calls of one iteration in flight (backend futures)."""

    rollouts: dict[int, Call[RolloutResult]]  # training worker index -> its rollout's future
    update: Call[UpdateResult] | None = None
    reanalyze: Call[list] | None = None
