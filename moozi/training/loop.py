"""What the driver (driver.py) asks of an agent kind's training loop: `SearchLoop` (search_loop.py; MuZero
and AlphaZero) and `ActorCriticLoop` (actor_critic_loop.py; PPO and IMPALA) both give it."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable
from typing import Any, Protocol

from moozi.config import Config
from moozi.envs.base import EnvSpec
from moozi.training.counters import Counters
from moozi.training.metrics_window import MetricsWindow


@dataclasses.dataclass
class TestCall:
    """An in-training test a loop started: its metrics and, for a best checkpoint, the learner's state at
    the tested update (backend futures, or values where the test ran at once; `TrainingLoop.get` reads
    either)."""

    metrics: Any
    state: Any | None


class TrainingLoop(Protocol):
    config: Config  # the run's config as saved in RUN/config.json ("auto" settings resolved)
    spec: EnvSpec
    backend: Any  # the roles' backend, or None where the loop has no roles (the Anakin actor-critic)
    searches: bool  # one search per env step (metrics: searches_per_s)
    tests_in_background: bool  # a test plays beside the next iteration, else it has run when launched
    log_event: Callable[[dict], None]  # set by the driver: writes one row of role "event"

    @staticmethod
    def check_before_run_dir(config: Config, resume: bool) -> None:
        """Refuses settings the loop cannot run, before the run directory is touched."""

    def __init__(self, config: Config, run_dir: pathlib.Path, *, interrupt: Callable[[], str | None],
                 resume: bool) -> None:
        """Builds the roles or trainer and saves the resolved config as RUN/config.json before any role
        starts; `interrupt` tells the roles' waits when to give up."""

    def iteration(self, counters: Counters, window: MetricsWindow, run_progress: float) -> bool:
        """One iteration: acting and learning; updates `counters` and `window`; returns whether the loop
        is ready to learn (a search agent's buffer holds replay.min_fill steps)."""

    def log_metrics(self, window: MetricsWindow, counters: Counters) -> dict: ...

    def launch_test(self, seed: int, keep_state: bool) -> TestCall: ...

    def cancel_test(self) -> None:
        """Ends the test in flight at its next step; its result will not be read (a stop gave up on it)."""

    def get(self, value: Any) -> Any:
        """The value of what `launch_test` returned (a backend future or a value)."""

    def train_state(self) -> Any:
        """The learner's state: a checkpoint's pytree (and the template to load one into)."""

    def state_arrays(self) -> dict: ...

    def restore(self, train_state: Any, arrays: dict) -> None: ...

    def close(self, test_in_flight: bool) -> None: ...
