"""The training loop of the search agents (agent=muzero, agent=alphazero; thesis 5.2.1): their roles,
built from one Config, and how one iteration moves data between them. `Driver` (driver.py) runs it.

Synchronous schedule (Cleanba 4.2). At iteration i the rollout workers act
with parameter version v_{i-1} while the parameter optimizer turns batches
sampled from the data of iterations < i into version v_i; then priorities go
back to the replay buffer, the new trajectories are added, and v_i becomes
the workers' next version. Every batch therefore comes from known policy
versions, and the same seed and config give the same metrics on the inline
and the Ray backend. The in-training test plays beside the next iteration.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import time
from collections.abc import Callable

from moozi.builders import env_spec
from moozi.config import TESTING_WORKER_CPUS, Config, resolve_rollout_workers, save_config
from moozi.core.replay import replay_bytes
from moozi.core.train_step import TrainState, decays_over_run
from moozi.core.types import sub_state
from moozi.envs.registry import is_jax_native
from moozi.training.backends import Call, RoleDiedError, make_backend
from moozi.training.counters import Counters
from moozi.training.episodes import RolloutResult
from moozi.training.loop import TestCall
from moozi.training.metrics_window import MetricsWindow
from moozi.training.replay_memory import check_replay_fits_here
from moozi.training.roles import TrainingWorker
from moozi.training.roles.anakin_self_play import AnakinRolloutWorker
from moozi.training.roles.parameter_optimizer import ParameterOptimizer, UpdateResult
from moozi.training.roles.reanalyze_worker import ReanalyzeRolloutWorker
from moozi.training.roles.replay_buffer import ReplayRole
from moozi.training.roles.self_play import TrainingRolloutWorker
from moozi.training.roles.testing_worker import TestingRolloutWorker


class SearchLoop:
    """The parameter optimizer, the replay buffer, the training rollout workers (self-play with
    search), the testing worker and, with train.reanalyze_fraction > 0, the reanalyze worker: each a
    role on the config's backend (inline, or Ray actors)."""

    searches = True  # one search per env step: the metrics window logs searches_per_s
    tests_in_background = True  # a test plays beside the next iteration

    @staticmethod
    def check_before_run_dir(config: Config, resume: bool) -> None:
        """A misspelt or unsupported game, or a buffer too big for this machine, fails before anything
        is written, so a bad command leaves no half-made run directory behind."""
        if not resume:
            check_replay_fits_here(config, env_spec(config))

    def __init__(self, config: Config, run_dir: pathlib.Path, *, interrupt: Callable[[], str | None], resume: bool):
        self.backend = make_backend(config.backend.kind, config.backend)
        try:
            # "auto" rollout workers: sized to the cluster (or machine), and saved as the number it became,
            # so a resumed run has the same workers whatever the cluster is then.
            config = resolve_rollout_workers(config, self.backend.cpus())
            self.config = config
            self.spec = env_spec(config)
            if resume:
                check_replay_fits_here(config, self.spec)
            # Before any role starts: a run killed while its roles start up can still be resumed.
            save_config(config, run_dir / "config.json")
        except BaseException:
            self.backend.shutdown()
            raise
        self.backend.interrupt = interrupt
        if decays_over_run(config.optimizer) and config.train.max_env_steps is None and config.train.max_minutes is None:
            print("moozi: optimizer.decay_over='run' without --max-env-steps or --max-minutes: the run has no "
                  "planned length, so the learning rate stays at its peak", file=sys.stderr)
        b = config.backend
        self.parameter_optimizer = self.backend.start(
            "parameter_optimizer", ParameterOptimizer, config, resources={"num_cpus": b.learner_cpus, "num_gpus": b.learner_gpus}
        )
        # The replay buffer's memory is reserved on the cluster with its CPUs: a node without room for
        # it refuses the run at placement, not by running out of memory an hour in.
        self.replay = self.backend.start("replay_buffer", ReplayRole, config, resources={
            "num_cpus": b.replay_cpus, "memory": int(replay_bytes(config.replay, self.spec))})
        self.workers = [
            self.backend.start(
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
        self.tester = self.backend.start(
            "testing_rollout_worker", TestingRolloutWorker, config, resources={"num_cpus": TESTING_WORKER_CPUS}
        )
        self.reanalyzer = None
        if config.train.reanalyze_fraction > 0:
            self.reanalyzer = self.backend.start(
                "reanalyze_rollout_worker", ReanalyzeRolloutWorker, config, resources={"num_cpus": b.rollout_worker_cpus},
                group="rollout",
            )
        try:
            # Every role placed at once, or none: a cluster too small for them refuses here, within
            # backend.placement_timeout_seconds, instead of leaving a role pending forever.
            self.backend.launch()
        except BaseException:
            self.backend.shutdown()
            raise
        self.log_event: Callable[[dict], None] = lambda row: None  # the driver sets it: a row of role "event"
        self._params = None  # the latest parameter version, fetched after each iteration
        self._ready = False  # whether the buffer holds enough to sample

    def get(self, value):
        """The value of a role call's future."""
        return self.backend.get(value)

    # --- checkpoints -------------------------------------------------------------------------
    def train_state(self) -> TrainState:
        return self.get(self.parameter_optimizer.call(ParameterOptimizer.get_state))

    def state_arrays(self) -> dict:
        """The replay buffer's and every training worker's state, as a checkpoint's named arrays."""
        arrays = {f"replay/{k}": v for k, v in self.get(self.replay.call(ReplayRole.state_dict)).items()}
        for i, state in self._worker_states():
            arrays.update({f"worker{i}/{k}": v for k, v in state.items()})
        return arrays

    def restore(self, train_state: TrainState, arrays: dict) -> None:
        self.get(self.parameter_optimizer.call(ParameterOptimizer.set_state, train_state))
        self.get(self.replay.call(ReplayRole.load_state_dict, sub_state(arrays, "replay/")))
        for i, worker in enumerate(self.workers):
            state = sub_state(arrays, f"worker{i}/")
            if state:  # absent when the worker had been lost at that checkpoint: it starts on fresh episodes
                self.get(worker.call(TrainingWorker.load_state_dict, state))

    # --- one iteration -----------------------------------------------------------------------
    def iteration(self, counters: Counters, window: MetricsWindow, run_progress: float) -> bool:
        """Launches the update, the rollouts and reanalyze on parameter version v_{i-1}, collects them
        into the buffer and fetches v_i; returns whether the buffer is ready to sample."""
        t_iter = time.perf_counter()
        if self._params is None:
            self._params = self.get(self.parameter_optimizer.call(ParameterOptimizer.get_params))
            self._ready = self.get(self.replay.call(ReplayRole.ready))
        version = counters.updates
        params_ref = self.backend.put(self._params)
        pending = self._launch(params_ref, version, counters, window, run_progress)
        self._ready = self._collect(pending, counters, window)
        t_params = time.perf_counter()
        self._params = self.get(self.parameter_optimizer.call(ParameterOptimizer.get_params))
        window.add("param_fetch_seconds", time.perf_counter() - t_params)
        window.add("iteration_seconds", time.perf_counter() - t_iter)
        return self._ready

    def _launch(self, params_ref, version: int, counters: Counters, window: MetricsWindow,
                run_progress: float) -> "_Pending":
        """Starts the iteration's calls: the update (once the buffer is ready), every training
        worker's rollout with version `version`, and reanalyze's share of trajectories."""
        train, backend = self.config.train, self.backend
        update = None
        if self._ready:
            batches = self.replay.call(ReplayRole.sample_batches, train.updates_per_iteration, train.batch_size)
            update = self.parameter_optimizer.call(ParameterOptimizer.update, backend.resolve_arg(batches), run_progress)
        active = self._active_workers()
        rollouts = {i: self.workers[i].call(TrainingWorker.run, params_ref, train.rollout_steps, version) for i in active}
        reanalyze = None
        if self.reanalyzer is not None and self._ready:
            fresh_steps = train.rollout_steps * self.config.env.num_envs * len(active)
            share = train.reanalyze_fraction / (1.0 - train.reanalyze_fraction)
            steps = int(round(share * fresh_steps))
            count = max(1, steps // max(self._mean_episode_length(window), 1))
            trajectories = self.replay.call(ReplayRole.sample_trajectories, count)
            reanalyze = self.reanalyzer.call(ReanalyzeRolloutWorker.run, params_ref, backend.resolve_arg(trajectories))
        return _Pending(rollouts, update, reanalyze)

    def _collect(self, pending: "_Pending", counters: Counters, window: MetricsWindow) -> bool:
        """Waits for the iteration's calls, feeds their results to the buffer and the counters;
        returns whether the buffer is ready to sample."""
        get = self.get
        t_wait = time.perf_counter()
        results = [r for r in (self._worker_get(i, f) for i, f in pending.rollouts.items()) if r is not None]
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

    def log_metrics(self, window: MetricsWindow, counters: Counters) -> dict:
        """The window's summary and the buffer's statistics: one metrics row."""
        metrics = window.summary(counters, searches=True)
        metrics.update(self.get(self.replay.call(ReplayRole.stats)))
        return metrics

    # --- the in-training test ----------------------------------------------------------------
    def launch_test(self, seed: int, keep_state: bool) -> TestCall:
        """Starts one run of the testing worker on the network the run's agent plays (the online one,
        or the target network, train.agent_network)."""
        train = self.config.train
        params = self._params
        if train.agent_network != "online":
            params = self.get(self.parameter_optimizer.call(ParameterOptimizer.get_params, train.agent_network))
        metrics = self.tester.call(TestingRolloutWorker.run, params, train.test_episodes, seed)
        # The tested state, should it become the best checkpoint: by the time the test ends the
        # learner has moved on. Calls to a role run in order, so this is the state after the update
        # the parameters came from.
        state = self.parameter_optimizer.call(ParameterOptimizer.get_state) if keep_state else None
        return TestCall(metrics, state)

    def cancel_test(self) -> None:
        # A Ray tester's call cannot be ended from here: its actor is killed when the run closes.
        if self.backend.kind == "inline":
            self.tester.obj.cancel()

    # --- lost workers ------------------------------------------------------------------------
    def _worker_get(self, i: int, future):
        """The value of training worker i's `future`, or None if the worker's process (or its node)
        died: what it had not returned is dropped whole, so no step is counted twice or half-written,
        and a replacement (same index, fresh envs) is started to rejoin when it is up."""
        try:
            return self.get(future)
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
        self.log_event({"training_workers_alive": alive, "training_worker_lost": i})
        self.workers[i] = self.backend.restart(self.workers[i])

    def _active_workers(self) -> list[int]:
        """The training workers that take part in this iteration: every one that is up. Replacements
        of lost workers join once they are up; with none up at all the run waits for one (a stop
        request or backend.wait_timeout_seconds ends that wait)."""
        while True:
            for i in sorted(self._lost):
                try:
                    up = self.backend.is_ready(self.workers[i])
                except RoleDiedError as e:
                    print(f"\n{self.workers[i].name}'s replacement died while starting ({e}); starting another",
                          file=sys.stderr)
                    self.workers[i] = self.backend.restart(self.workers[i])
                    continue
                if up:
                    self._lost.discard(i)
                    print(f"\n{self.workers[i].name} is back: {len(self.workers) - len(self._lost)} of "
                          f"{len(self.workers)} training workers", file=sys.stderr)
                    self.log_event({"training_workers_alive": len(self.workers) - len(self._lost),
                                    "training_worker_back": i})
            active = [i for i in range(len(self.workers)) if i not in self._lost]
            if active:
                return active
            i = min(self._lost)
            try:
                self.backend.wait_ready(self.workers[i])
            except RoleDiedError:
                self.workers[i] = self.backend.restart(self.workers[i])

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

    def close(self, test_in_flight: bool) -> None:
        if self.backend.kind == "inline" and test_in_flight:
            # A stop that gave up on another role's wait, or an error, can leave a test playing on its
            # thread: end it at its next step rather than wait for all of it (Ray actors are killed).
            self.tester.obj.cancel()
        for handle in [*self.workers, self.tester, self.reanalyzer, self.parameter_optimizer, self.replay]:
            if handle is not None and self.backend.kind == "inline":
                handle.drain()
                close = getattr(handle.obj, "close", None)
                if close:
                    close()
        self.backend.shutdown()


def training_worker_class(config: Config) -> type[TrainingWorker]:
    """The training rollout worker for the config's game: `AnakinRolloutWorker` for JAX-native
    games (the whole self-play segment is one jitted program), `TrainingRolloutWorker` otherwise."""
    return AnakinRolloutWorker if is_jax_native(config.game) else TrainingRolloutWorker


@dataclasses.dataclass
class _Pending:
    """The calls of one iteration in flight (backend futures)."""

    rollouts: dict[int, Call[RolloutResult]]  # training worker index -> its rollout's future
    update: Call[UpdateResult] | None = None
    reanalyze: Call[list] | None = None
