"""A run's counters, shared by every driver: logged with the metrics, saved in every checkpoint's meta
(`counters`) and read back on resume; the stopping rules read them (training/stopping.py)."""

from __future__ import annotations

import dataclasses

import numpy as np


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
