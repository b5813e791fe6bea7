"""Cutting a batched stream of step samples into per-episode trajectories, and what a rollout returns.

A rollout worker's B envs finish episodes at different times. Each step is
written once, as a whole batch, into time-major ring arrays [T_cap, B, ...];
when env b's step is last, its episode is read out with one fancy index.
That keeps per-step work vectorised over the batch (no loop over envs).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from moozi.core.types import Trajectory
from moozi.envs.base import EnvSpec, StepOutput, encode_obs, stored_obs_dtype


@dataclasses.dataclass
class RolloutResult:
    """What one call of a rollout worker returns to the driver."""

    trajectories: list[Trajectory]  # finished episodes, in the order they finished
    metrics: dict[str, float]
    policy_version: int  # the parameter version every action of this call was chosen with
    env_steps: int


class EpisodeRecorder:
    """Collects step samples of B envs and returns finished episodes as Trajectory objects."""

    def __init__(self, spec: EnvSpec, num_envs: int, initial_capacity: int = 256):
        self.spec = spec
        self.num_envs = num_envs
        self._capacity = initial_capacity
        self._arrays = self._allocate(initial_capacity)
        self._time = 0  # steps written so far (the next row is _time % capacity)
        self._episode_start = np.zeros(num_envs, np.int64)  # time index of each env's is_first step
        self._started = np.zeros(num_envs, bool)  # the env's current episode began while recording

    def _allocate(self, capacity: int) -> dict[str, np.ndarray]:
        b, a = self.num_envs, self.spec.num_actions
        return {
            "obs": np.zeros((capacity, b, *self.spec.obs_shape), stored_obs_dtype(self.spec)),
            "action": np.zeros((capacity, b), np.int32),
            "reward": np.zeros((capacity, b), np.float32),
            "is_first": np.zeros((capacity, b), bool),
            "is_last": np.zeros((capacity, b), bool),
            "legal_actions": np.zeros((capacity, b, a), bool),
            "to_play": np.zeros((capacity, b), np.int32),
            "root_value": np.zeros((capacity, b), np.float32),
            "action_probs": np.zeros((capacity, b, a), np.float32),
        }

    def _grow(self) -> None:
        """Doubles the ring, keeping the rows of every open episode in time order."""
        old_cap = self._capacity
        new_cap = 2 * old_cap
        keep_from = self._time - old_cap  # rows older than this are already gone
        times = np.arange(max(keep_from, 0), self._time)
        new = self._allocate(new_cap)
        for key, value in self._arrays.items():
            new[key][times % new_cap] = value[times % old_cap]
        self._arrays = new
        self._capacity = new_cap

    def record(self, step: StepOutput, action, root_value, action_probs) -> list[Trajectory]:
        """Writes one batched step sample; returns the episodes that ended at this step."""
        open_lengths = self._time - self._episode_start[self._started]
        if open_lengths.size and open_lengths.max() + 1 >= self._capacity:
            self._grow()
        row = self._time % self._capacity
        arrays = self._arrays
        is_first = np.asarray(step.is_first, bool)
        is_last = np.asarray(step.is_last, bool)
        arrays["obs"][row] = encode_obs(step.obs, self.spec)
        arrays["action"][row] = action
        arrays["reward"][row] = step.reward
        arrays["is_first"][row] = is_first
        arrays["is_last"][row] = is_last
        arrays["legal_actions"][row] = step.legal_actions
        arrays["to_play"][row] = step.to_play
        arrays["root_value"][row] = root_value
        arrays["action_probs"][row] = action_probs
        self._episode_start[is_first] = self._time
        self._started |= is_first
        finished = []
        for b in np.flatnonzero(is_last & self._started):
            rows = np.arange(self._episode_start[b], self._time + 1) % self._capacity
            finished.append(Trajectory(**{key: value[rows, b].copy() for key, value in arrays.items()}))
        self._started &= ~is_last
        self._time += 1
        return finished

    def open_episode_lengths(self) -> np.ndarray:
        """Steps recorded so far in each env's unfinished episode (0 where none is open)."""
        return np.where(self._started, self._time - self._episode_start, 0)

    def state_dict(self) -> dict[str, np.ndarray]:
        """The open episodes, for checkpoints: enough to resume recording exactly."""
        first = int(self._episode_start[self._started].min()) if self._started.any() else self._time
        times = np.arange(first, self._time)
        rows = times % self._capacity
        out = {f"ring_{key}": value[rows] for key, value in self._arrays.items()}
        out["time"] = np.asarray(self._time, np.int64)
        out["first_time"] = np.asarray(first, np.int64)
        out["episode_start"] = self._episode_start.copy()
        out["started"] = self._started.copy()
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        time = int(state["time"])
        first = int(state["first_time"])
        count = time - first
        capacity = self._capacity
        while capacity <= count:
            capacity *= 2
        self._capacity = capacity
        self._arrays = self._allocate(capacity)
        times = np.arange(first, time)
        for key in self._arrays:
            self._arrays[key][times % capacity] = state[f"ring_{key}"]
        self._time = time
        self._episode_start = np.asarray(state["episode_start"], np.int64).copy()
        self._started = np.asarray(state["started"], bool).copy()
