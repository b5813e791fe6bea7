"""A vectorized mock env that replays stored trajectories, for reanalyze (thesis 5.2.2-5.2.3, 5.2.11).

Transitions are predetermined: `step` ignores the actions it is given and
outputs each slot's stored steps one at a time, so a reanalyze worker can run
its ordinary acting loop (history stacking + search) over old trajectories.

Typical reanalyze loop:

    env = MockVectorEnv(supply, num_envs=B, spec=spec)
    out = env.reset()
    while True:
        action = env.stored_actions()            # a_t of each slot (for the history stacker)
        ... search at `out` -> root_value [B], action_probs [B, A]
        env.record(root_value, action_probs)     # new v*_t, p*_t for the current steps
        try:
            out = env.step(action, out.is_last)  # next stored step; a new trajectory where is_last
        except SupplyExhaustedError:
            break
        replay.add(env.pop_finished())           # trajectories with updated statistics

Slot life cycle: `reset` and every `step` whose `is_last` input is True for a
slot finish that slot's trajectory (it moves to the finished list) and load
the next one from the supply. When the supply is empty the slot becomes
inactive: `active[i]` is False and its outputs are zero steps (no legal action)
from then on. `step` raises SupplyExhaustedError once every slot is inactive,
i.e. on the call after the last trajectory was finished, so nothing is lost.
"""

from __future__ import annotations

import collections
from typing import Iterable, NamedTuple

import numpy as np

from moozi.core.types import Trajectory
from moozi.envs.base import DUMMY_ACTION, EnvSpec, StepOutput, decode_obs, empty_step
from moozi.errors import SupplyExhaustedError


class TrajectorySupply:
    """A FIFO queue of trajectories to replay, each given a sequential id when it is put."""

    def __init__(self, trajectories: Iterable[Trajectory] = ()):
        self._queue: collections.deque[tuple[int, Trajectory]] = collections.deque()
        self._next_id = 0
        for trajectory in trajectories:
            self.put(trajectory)

    def put(self, trajectory: Trajectory) -> int:
        """Queues one episode and returns its id (0, 1, 2, ... in the order put)."""
        trajectory_id = self._next_id
        self._next_id += 1
        self._queue.append((trajectory_id, trajectory))
        return trajectory_id

    def get(self) -> tuple[int, Trajectory] | None:
        """The oldest queued (id, trajectory), or None when the supply is empty."""
        return self._queue.popleft() if self._queue else None

    def __len__(self) -> int:
        return len(self._queue)


class Positions(NamedTuple):
    """Where each slot is; -1 in both fields for inactive slots."""

    trajectory_id: np.ndarray  # [B] int64: the supply's id of the slot's trajectory
    step: np.ndarray  # [B] int64: index t of the step the slot last output


class _Slot:
    """One slot's trajectory (as numpy) and its step index; the statistics are private copies."""

    def __init__(self, trajectory_id: int, trajectory: Trajectory, obs_levels: int | None):
        self.trajectory_id = trajectory_id
        self.obs_levels = obs_levels  # stored observations are decoded as the bridge emitted them
        self.trajectory = Trajectory(*(np.asarray(x) for x in trajectory))
        self.root_value = np.array(self.trajectory.root_value, np.float32, copy=True)  # [T]
        self.action_probs = np.array(self.trajectory.action_probs, np.float32, copy=True)  # [T, A]
        self.t = 0

    def output(self) -> StepOutput:
        traj, t = self.trajectory, self.t
        return StepOutput(
            obs=decode_obs(traj.obs[t], self.obs_levels),
            is_first=np.bool_(traj.is_first[t]),
            is_last=np.bool_(traj.is_last[t]),
            reward=np.float32(traj.reward[t]),
            legal_actions=np.asarray(traj.legal_actions[t], bool),
            to_play=np.int32(traj.to_play[t]),
        )

    def finished(self) -> Trajectory:
        return self.trajectory._replace(root_value=self.root_value, action_probs=self.action_probs)


class MockVectorEnv:
    """B slots replaying trajectories from a `TrajectorySupply`, with the host VectorEnv interface."""

    def __init__(self, supply: TrajectorySupply, num_envs: int, spec: EnvSpec):
        self.spec = spec
        self.num_envs = num_envs
        self._supply = supply
        self._slots: list[_Slot | None] = [None] * num_envs
        self._finished: list[tuple[int, Trajectory]] = []

    @property
    def active(self) -> np.ndarray:
        """[B] bool: which slots still replay a trajectory."""
        return np.array([slot is not None for slot in self._slots], bool)

    def _load(self, i: int) -> None:
        if self._slots[i] is not None:
            self._finished.append((self._slots[i].trajectory_id, self._slots[i].finished()))
        item = self._supply.get()
        self._slots[i] = None if item is None else _Slot(*item, self.spec.stored_obs_levels)

    def _outputs(self) -> StepOutput:
        zero = empty_step(self.spec)
        steps = [zero if slot is None else slot.output() for slot in self._slots]
        return StepOutput(*(np.stack(field) for field in zip(*steps)))

    def reset(self) -> StepOutput:
        """Finishes whatever the slots hold and loads new trajectories; their first steps, batched [B]."""
        for i in range(self.num_envs):
            self._load(i)
        if not self.active.any():
            raise SupplyExhaustedError("the mock env's trajectory supply is empty: nothing to replay")
        return self._outputs()

    def step(self, actions, is_last) -> StepOutput:
        """The next stored step of every slot [B]; `actions` [B] are ignored (transitions are stored).

        Where `is_last` [B] is True the slot's trajectory is finished and the next one starts.
        Raises SupplyExhaustedError when every slot is inactive.
        """
        del actions  # the stored trajectory decides the transition
        if not self.active.any():
            raise SupplyExhaustedError("the mock env's trajectory supply ran out: every slot is inactive")
        is_last = np.broadcast_to(np.asarray(is_last, bool), (self.num_envs,))
        for i, slot in enumerate(self._slots):
            if slot is None:
                continue
            stored_last = bool(slot.trajectory.is_last[slot.t])
            if bool(is_last[i]) != stored_last:
                raise ValueError(f"slot {i}: is_last={bool(is_last[i])} but the stored step {slot.t} has is_last={stored_last}")
            if stored_last:
                self._load(i)
            else:
                slot.t += 1
        return self._outputs()

    def current_positions(self) -> Positions:
        """Which trajectory (supply id) and step index each slot is at."""
        ids = np.array([-1 if s is None else s.trajectory_id for s in self._slots], np.int64)
        steps = np.array([-1 if s is None else s.t for s in self._slots], np.int64)
        return Positions(trajectory_id=ids, step=steps)

    def stored_actions(self) -> np.ndarray:
        """[B] int32: the stored a_t at each slot's current step (the dummy for inactive slots).

        Pass these to `step` and to the history stacker, so the history holds the
        actions that were really taken.
        """
        return np.array([DUMMY_ACTION if s is None else s.trajectory.action[s.t] for s in self._slots], np.int32)

    def record(self, root_value, action_probs) -> None:
        """Stores new search statistics v*_t [B] and p*_t [B, A] for every active slot's current step."""
        root_value = np.asarray(root_value, np.float32)
        action_probs = np.asarray(action_probs, np.float32)
        for i, slot in enumerate(self._slots):
            if slot is not None:
                slot.root_value[slot.t] = root_value[i]
                slot.action_probs[slot.t] = action_probs[i]

    def pop_finished(self, *, with_ids: bool = False) -> list:
        """The trajectories finished since the last call, in the order they finished.

        Each equals its original except `root_value` and `action_probs`, which
        hold what `record` stored (steps never recorded keep their old values).
        With `with_ids`, items are (supply id, trajectory) pairs.
        """
        finished, self._finished = self._finished, []
        return finished if with_ids else [trajectory for _, trajectory in finished]
