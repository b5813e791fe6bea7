"""The replay buffer (thesis 5.2.16): flat step storage, prioritized sampling,
targets gathered at sample time.

Storage. Every step is stored once in host-side numpy arrays of `capacity`
slots, used as a ring: a trajectory takes consecutive slots (wrapping around
the end) and a target is gathered from them by index when sampled
(`moozi.core.targets`). Eviction is FIFO by whole trajectories: before a new
trajectory is written, the oldest trajectories are dropped until it fits, so
a stored step's history, unroll and bootstrap windows never read a slot that
was overwritten by another episode (the windows only read slots of their own
episode; everything else is masked by t and T).

Gather. Sampling runs the index arithmetic and the row gather on the host
with numpy (a few KB per target) and hands the rows to one jitted assembly
(masking, history stacking, returns). Measured on CPU at batch 256 with 1e6
stored steps, this costs the same as keeping device copies of the storage
(updated in place with donated buffers) and running `make_targets` whole under
jit (0.46 vs 0.48 ms for MinAtar Breakout shapes, 0.23 vs 0.20 ms for
tic-tac-toe), so we keep the simpler design: one copy of the data, on the host,
where priorities, checkpoints and reanalyze need it anyway.

Observations are stored as uint8 when the env spec says `binary_obs` or sets
`obs_levels` (8-bit frames: k / 255 is stored as k, exactly), float32 otherwise
(float16 would silently round continuous observations); the jitted target
assembly turns them back into the bridge's floats.

Indices. `sample` returns global step positions (int64, counting every step
ever added), not slots: `update_priorities` ignores positions that were
evicted in the meantime instead of writing into a slot's new tenant, which
matters when acting and learning run asynchronously.

Priorities. A step's priority is delta = |v* - G^N| (set at insertion with the
same return code as the targets, refreshed by the learner after each train
step and by reanalyze), score = delta + epsilon (Schaul et al.'s epsilon keeps
every step drawable). Sampling modes:
  uniform       P(i) = 1 / N; every importance weight is 1.
  proportional  P(i) = score_i^a / sum_k score_k^a, from a sum tree: O(log n) per draw and update.
  rank          P(i) = rank_i^-a / sum_k k^-a, rank 1 = the largest score. A sum tree over rank
                weights; ranks come from a sorted snapshot of all scores. A changed score gets the
                rank it would have in the snapshot (binary search, O(log n)), and the snapshot is
                re-sorted (O(n log n)) before the next draw once at least
                `rank_resort_fraction * N` scores changed, so the cost per changed item stays
                O(log n / fraction) amortised and probabilities are exact right after a re-sort.
                Ties rank the older step first.
Draws are independent (not stratified), so each draw follows P(i) exactly.

Importance weights: w_i = (N P(i))^-b / max_j (N P(j))^-b with the max over the
sampled batch, i.e. w_i = (min_{j in batch} P(j) / P(i))^b. Schaul et al. (2016,
Algorithm 1) take the max over the whole buffer; we do not, because one stored
step with delta ~ 0 (probability ~ epsilon) then drives every other weight to ~0,
and the loss with it, leaving only the unweighted L2 term (measured: mean weight
8e-6 on tic-tac-toe, no learning). The weights' ratios, which is what corrects
the sampling bias, are the same either way. Recomputed for every batch.

Minimum fill: `ready()` stays False until `min_fill` steps are stored (ELF
OpenGo A.4: training on a handful of games overfits before more arrive).
`sample` itself works on any non-empty buffer; the driver decides when to train.

Not thread-safe: one owner (the inline driver or one Ray actor) calls it.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Callable

import jax
import numpy as np

from moozi.core.stochastic_loss import StochasticTrainingTarget, gather_future_stacked_obs, next_value_discounts
from moozi.core.sum_tree import SumTree
from moozi.core.targets import (
    StepStorage,
    TargetConfig,
    assemble_targets,
    gather_window,
    turn_sign_offsets,
    trajectory_value_difference,
)
from moozi.core.territory import territory_targets
from moozi.core.types import TrainingTarget, Trajectory
from moozi.envs.base import EnvSpec, encode_obs, stored_obs_dtype
from moozi.errors import MooziError


class SamplingMode(enum.Enum):
    UNIFORM = "uniform"
    PROPORTIONAL = "proportional"
    RANK = "rank"


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    """Replay buffer settings (thesis 5.2.16)."""

    capacity: int = 1_000_000
    """Stored steps at most; the oldest whole trajectories are evicted to make room."""
    min_fill: int = 10_000
    """Stored steps before `ready()` is True (ELF OpenGo A.4)."""
    sampling: SamplingMode = SamplingMode.PROPORTIONAL
    """uniform | proportional | rank (Schaul et al. 2016)."""
    priority_exponent: float = 0.6
    """alpha: 0 is uniform, 1 fully prioritized (Schaul et al.'s 0.6; MuZero used 1)."""
    importance_exponent: float = 0.4
    """beta: how much of the sampling bias the importance weights undo (1 = all; Schaul et al. start at 0.4)."""
    priority_epsilon: float = 0.01
    """epsilon added to delta so no step has probability ~0. With max-normalised weights the
    ratio (max score / min score)^(alpha * beta) sets how small the typical weight gets; with
    alpha = beta = 1 and epsilon = 1e-6 we measured mean weights of 0.03 on tic-tac-toe, which
    left the unweighted L2 term in charge and stopped the value head from learning."""
    rank_resort_fraction: float = 0.1
    """rank mode: re-sort all scores once more than this fraction of them changed."""
    symmetry_augmentation: bool = True
    """Apply a random board symmetry to each sampled target where the game has one (8 for
    tic-tac-toe and Go, the left-right mirror for Connect Four; see moozi.core.symmetry)."""

    def __post_init__(self):
        try:
            object.__setattr__(self, "sampling", SamplingMode(self.sampling))
        except ValueError:
            allowed = ", ".join(m.value for m in SamplingMode)
            raise MooziError(f"replay sampling={self.sampling!r}; allowed: {allowed}") from None
        if self.capacity < 1:
            raise MooziError(f"replay capacity must be >= 1 step, got {self.capacity}")
        if not 0 <= self.min_fill <= self.capacity:
            raise MooziError(f"replay min_fill must lie in [0, capacity={self.capacity}], got {self.min_fill}")
        if self.priority_exponent < 0 or self.importance_exponent < 0:
            raise MooziError("replay priority_exponent and importance_exponent must be >= 0")
        if self.priority_epsilon <= 0:
            raise MooziError(f"replay priority_epsilon must be > 0, got {self.priority_epsilon}")
        if not 0 < self.rank_resort_fraction <= 1:
            raise MooziError(f"replay rank_resort_fraction must lie in (0, 1], got {self.rank_resort_fraction}")


Augment = Callable[[TrainingTarget, jax.Array], TrainingTarget]

_assemble_jit = jax.jit(assemble_targets, static_argnames=("config", "num_actions", "discount_sign", "obs_levels"))

_territory_jit = jax.jit(territory_targets, static_argnames=("territory",))

_SAMPLING_CODES = {mode: code for code, mode in enumerate(SamplingMode)}
_COUNTERS = ("head", "tail", "next_id", "oldest_id", "changed_since_sort")
_MASK64 = (1 << 64) - 1


def _last_occurrence(indices: np.ndarray, values: np.ndarray):
    """Deduplicates (indices, values), keeping each index's last value (a later
    update in one call wins, e.g. a step drawn twice in one batch)."""
    unique, first_in_reversed = np.unique(indices[::-1], return_index=True)
    return unique, values[::-1][first_in_reversed]


def replay_bytes(config: ReplayConfig, spec: EnvSpec) -> int:
    """The bytes a ReplayBuffer of `config` holds for `spec`, computed without allocating them
    (the driver refuses a capacity that cannot fit before anything is built)."""
    C, A = config.capacity, spec.num_actions
    per_step = (
        int(np.prod(spec.obs_shape)) * np.dtype(stored_obs_dtype(spec)).itemsize
        + (2 if A <= np.iinfo(np.int16).max else 4)  # action
        + 4 + 4 + 4 * A + 4 + 4  # reward, v*, p*, step index, episode length
        + A + 1 + 8 + 8 + 8  # legal actions, to_play, delta, trajectory start and length
    )
    total = C * per_step
    if config.sampling is not SamplingMode.UNIFORM:
        leaves = 1 << max(0, (C - 1).bit_length())
        total += 2 * (2 * leaves) * 8  # the sum and min trees
    return total


class ReplayBuffer:
    """A stateful shell around numpy storage, a sum tree and the jitted target assembly."""

    def __init__(self, config: ReplayConfig, target_config: TargetConfig, spec: EnvSpec, seed: int,
                 augment: Augment | None = None, future_observations: bool = False,
                 territory_targets: bool = False):
        """`augment(batch, key) -> batch` is applied to every sampled batch (board symmetries);
        `key` is a jax PRNG key drawn from the buffer's own RNG, so checkpoints replay it.

        `future_observations`: each batch is a `StochasticTrainingTarget`, the targets plus the history
        inputs at t+1 .. t+K that Stochastic MuZero's chance encoder reads
        (`moozi.core.stochastic_loss.gather_future_stacked_obs`, B·(L+K-1) frames read on the host);
        the augment moves them with the rest of their element.

        `territory_targets` (games with an `EnvSpec.territory`): each target also carries its
        episode's final ownership and score margin (moozi/core/territory.py), read from the
        episode's last stored observation."""
        if territory_targets and spec.territory is None:
            raise MooziError(f"{spec.name} gives no ownership or score targets (it is not a territory game)")
        self._territory = spec.territory if territory_targets else None
        self.config = config
        self._future_observations = future_observations
        self.target_config = target_config
        self.spec = spec
        self._augment = augment
        self._rng = np.random.Generator(np.random.PCG64(seed))
        C, A = config.capacity, spec.num_actions
        action_dtype = np.int16 if A <= np.iinfo(np.int16).max else np.int32
        self._storage = StepStorage(
            obs=np.zeros((C, *spec.obs_shape), stored_obs_dtype(spec)),
            action=np.zeros((C,), action_dtype),
            reward=np.zeros((C,), np.float32),
            root_value=np.zeros((C,), np.float32),
            action_probs=np.zeros((C, A), np.float32),
            step_index=np.zeros((C,), np.int32),
            episode_length=np.ones((C,), np.int32),
        )
        self._legal_actions = np.zeros((C, A), bool)  # kept only to hand trajectories back to reanalyze
        self._to_play = np.zeros((C,), np.int8)
        self._delta = np.zeros((C,), np.float64)  # [C] value difference |v* - G^N|
        # Trajectory records in a ring indexed by id % C (at most C live trajectories).
        self._traj_start = np.zeros((C,), np.int64)  # global position of step 0
        self._traj_length = np.zeros((C,), np.int64)
        self._counters = dict.fromkeys(_COUNTERS, 0)
        self._tree = None if config.sampling is SamplingMode.UNIFORM else SumTree(C)
        self._pending_weights: list | None = None  # (slots, weights) held back by add_many
        self._rank_snapshot = np.zeros((0,), np.float64)  # ascending scores at the last re-sort

    # ------------------------------------------------------------------ sizes

    def __len__(self) -> int:
        return self._counters["head"] - self._counters["tail"]

    @property
    def num_trajectories(self) -> int:
        return self._counters["next_id"] - self._counters["oldest_id"]

    @property
    def oldest_position(self) -> int:
        """Global position of the oldest stored step; `probabilities()[j]` is position oldest + j."""
        return self._counters["tail"]

    def ready(self) -> bool:
        return len(self) >= max(1, self.config.min_fill)

    def bytes_per_step(self) -> float:
        """Bytes of buffer memory per storable step (storage, priorities, trajectory records, tree)."""
        arrays = [*self._storage, self._legal_actions, self._to_play, self._delta, self._traj_start,
                  self._traj_length]
        total = sum(a.nbytes for a in arrays)
        if self._tree is not None:
            total += self._tree._sum.nbytes + self._tree._min.nbytes
        return total / self.config.capacity

    def stats(self) -> dict[str, float]:
        """Scalars for logging."""
        live = self._live_slots()
        delta = self._delta[live]
        return {
            "size": float(len(self)),
            "capacity": float(self.config.capacity),
            "fill": len(self) / self.config.capacity,
            "num_trajectories": float(self.num_trajectories),
            "steps_added": float(self._counters["head"]),
            "trajectories_added": float(self._counters["next_id"]),
            "mean_priority": float(delta.mean()) if delta.size else 0.0,
            "max_priority": float(delta.max()) if delta.size else 0.0,
            "mean_episode_length": len(self) / max(1, self.num_trajectories),
        }

    # ------------------------------------------------------------------ adding

    def add_many(self, trajectories) -> None:
        """`add` of each trajectory in order, with one sum-tree update for all of them: the tree's
        ~log2(capacity) levels then cost one pass per rollout instead of two per episode (the
        largest replay cost in a tic-tac-toe profile). Same tree as adding one by one: later writes
        to a slot win, as they would have."""
        if self._tree is None:
            for trajectory in trajectories:
                self.add(trajectory)
            return
        self._pending_weights = []
        try:
            for trajectory in trajectories:
                self.add(trajectory)
        finally:
            pending, self._pending_weights = self._pending_weights, None
            if pending:
                self._tree.update(np.concatenate([i for i, _ in pending]), np.concatenate([w for _, w in pending]))

    def _set_weights(self, slots: np.ndarray, weights: np.ndarray) -> None:
        if self._pending_weights is not None:
            self._pending_weights.append((slots, np.asarray(weights, np.float64)))
        else:
            self._tree.update(slots, weights)

    def add(self, trajectory: Trajectory) -> None:
        """Stores one finished episode, evicting the oldest episodes if needed."""
        length = self._check_trajectory(trajectory)
        C = self.config.capacity
        if length > C:
            raise MooziError(f"an episode of {length} steps does not fit in replay capacity {C}; raise capacity")
        evicted = []
        while C - len(self) < length:
            evicted.append(self._evict_oldest())
        if evicted and self._tree is not None:
            slots = np.concatenate(evicted)
            self._set_weights(slots, np.zeros(slots.shape))

        head = self._counters["head"]
        slots = (head + np.arange(length)) % C
        obs = encode_obs(trajectory.obs, self.spec)
        s = self._storage
        s.obs[slots] = obs
        s.action[slots] = np.asarray(trajectory.action)
        s.reward[slots] = np.asarray(trajectory.reward)
        s.root_value[slots] = np.asarray(trajectory.root_value)
        s.action_probs[slots] = np.asarray(trajectory.action_probs)
        s.step_index[slots] = np.arange(length)
        s.episode_length[slots] = length
        self._legal_actions[slots] = np.asarray(trajectory.legal_actions)
        self._to_play[slots] = np.asarray(trajectory.to_play)

        ring = self._counters["next_id"] % C
        self._traj_start[ring] = head
        self._traj_length[ring] = length
        self._counters["next_id"] += 1
        self._counters["head"] += length
        self._set_delta(slots, self._trajectory_delta(slots))

    def _check_trajectory(self, trajectory: Trajectory) -> int:
        length = int(np.shape(trajectory.action)[0])
        A = self.spec.num_actions
        expected = {
            "obs": (length, *self.spec.obs_shape),
            "action": (length,),
            "reward": (length,),
            "legal_actions": (length, A),
            "to_play": (length,),
            "root_value": (length,),
            "action_probs": (length, A),
        }
        for name, shape in expected.items():
            if tuple(np.shape(getattr(trajectory, name))) != shape:
                raise ValueError(f"trajectory.{name} has shape {np.shape(getattr(trajectory, name))}, expected {shape}")
        if length < 1:
            raise ValueError("cannot add an empty trajectory")
        return length

    def _evict_oldest(self) -> np.ndarray:
        C = self.config.capacity
        ring = self._counters["oldest_id"] % C
        length = int(self._traj_length[ring])
        slots = (self._counters["tail"] + np.arange(length)) % C
        self._delta[slots] = 0.0
        self._counters["tail"] += length
        self._counters["oldest_id"] += 1
        return slots

    def _live_slots(self) -> np.ndarray:
        return (self._counters["tail"] + np.arange(len(self))) % self.config.capacity

    def _trajectory_slots(self, trajectory_id: int) -> np.ndarray:
        ring = trajectory_id % self.config.capacity
        return (self._traj_start[ring] + np.arange(self._traj_length[ring])) % self.config.capacity

    def _trajectory_delta(self, slots: np.ndarray) -> np.ndarray:
        s = self._storage
        to_play = self._to_play[slots] if self.spec.per_step_turn_signs else None
        return trajectory_value_difference(s.reward[slots], s.root_value[slots], config=self.target_config,
                                           discount_sign=self.spec.discount_sign, to_play=to_play)

    # ------------------------------------------------------------------ priorities

    def _scores(self, slots: np.ndarray) -> np.ndarray:
        return self._delta[slots] + self.config.priority_epsilon

    def _set_delta(self, slots: np.ndarray, delta: np.ndarray) -> None:
        """Stores delta for `slots` (unique) and updates their sampling weights."""
        self._delta[slots] = delta
        if self._tree is None:
            return
        alpha = self.config.priority_exponent
        if self.config.sampling is SamplingMode.PROPORTIONAL:
            self._set_weights(slots, self._scores(slots) ** alpha)
            return
        snapshot = self._rank_snapshot
        # Rank the new score against the snapshot: 1 + the number of larger scores.
        rank = 1 + snapshot.size - np.searchsorted(snapshot, self._scores(slots), side="right")
        self._set_weights(slots, rank.astype(np.float64) ** -alpha)
        self._counters["changed_since_sort"] += slots.size

    def _resort_if_stale(self) -> None:
        if self.config.sampling is not SamplingMode.RANK:
            return
        # `<`, not `<=`: with the fraction at 1 a buffer whose every score changed (a fresh fill, a
        # restore from another sampling mode) must re-sort, or all its steps keep rank 1.
        if self._counters["changed_since_sort"] < self.config.rank_resort_fraction * len(self):
            return
        live = self._live_slots()
        scores = self._scores(live)
        order = np.argsort(-scores, kind="stable")  # descending; stable: ties rank the older step first
        leaves = np.zeros(self.config.capacity, np.float64)
        leaves[live[order]] = np.arange(1, live.size + 1, dtype=np.float64) ** -self.config.priority_exponent
        self._tree.set_all(leaves)
        self._rank_snapshot = scores[order[::-1]]  # ascending, for searchsorted
        self._counters["changed_since_sort"] = 0

    def update_priorities(self, indices, priorities) -> None:
        """Sets delta of the steps at global positions `indices` [n] to `priorities` [n]
        (the learner's new |v* - G^N| or equivalent). Evicted positions are ignored;
        a position given twice keeps its last value."""
        positions = np.asarray(indices, np.int64).reshape(-1)
        delta = np.asarray(priorities, np.float64).reshape(-1)
        if positions.shape != delta.shape:
            raise ValueError(f"{positions.size} indices but {delta.size} priorities")
        if not np.all(np.isfinite(delta)):
            raise ValueError("priorities must be finite")
        if np.any(positions >= self._counters["head"]) or np.any(positions < 0):
            raise ValueError("update_priorities got a position that was never stored")
        live = positions >= self._counters["tail"]
        slots, delta = _last_occurrence(positions[live] % self.config.capacity, np.abs(delta[live]))
        self._set_delta(slots, delta)

    def probabilities(self) -> np.ndarray:
        """P(i) of every stored step [len(self)], oldest first (entry j is position oldest_position + j)."""
        if len(self) == 0:
            return np.zeros((0,), np.float64)
        if self._tree is None:
            return np.full(len(self), 1.0 / len(self))
        self._resort_if_stale()
        return self._tree.leaves[self._live_slots()] / self._tree.total

    # ------------------------------------------------------------------ sampling

    def sample(self, batch_size: int) -> tuple[TrainingTarget | StochasticTrainingTarget, np.ndarray]:
        """Draws `batch_size` steps (with replacement) -> (targets with importance weights, positions [B]);
        with `future_observations` the targets come wrapped in a `StochasticTrainingTarget`."""
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        C = self.config.capacity
        tail = self._counters["tail"]
        if self._tree is None:
            positions = tail + self._rng.integers(len(self), size=batch_size)
            slots = positions % C
            weights = np.ones((batch_size,), np.float32)
        else:
            self._resort_if_stale()
            slots = self._tree.find(self._rng.random(batch_size) * self._tree.total)
            positions = tail + (slots - tail) % C
            leaf = self._tree.leaves[slots]
            # Normalised by the batch's largest weight (its least likely step), not the buffer's:
            # Schaul et al. divide by the buffer maximum, but one step with delta ~ 0 (probability
            # ~ epsilon) then shrinks every other weight towards 0 and with it the whole loss
            # against the unweighted L2 term. Batch normalisation keeps the weights' ratios.
            weights = ((leaf.min() / leaf) ** self.config.importance_exponent).astype(np.float32)
        window = gather_window(self._storage, slots, self.target_config, xp=np)
        to_play = None
        if self.spec.per_step_turn_signs:
            to_play = self._to_play[(slots[:, None] + turn_sign_offsets(self.target_config)[None, :]) % C]
        targets = _assemble_jit(window, config=self.target_config, num_actions=self.spec.num_actions,
                                discount_sign=self.spec.discount_sign, importance_weight=weights,
                                obs_levels=self.spec.stored_obs_levels, to_play=to_play)
        if self._territory is not None:
            storage = self._storage
            plies_to_end = storage.episode_length[slots] - 1 - storage.step_index[slots]
            final_obs = storage.obs[(slots + plies_to_end) % C]
            ownership, score = _territory_jit(final_obs, plies_to_end, self._territory)
            targets = targets._replace(ownership=ownership, score_margin=score)
        if self._future_observations:
            future = gather_future_stacked_obs(self._storage, slots, config=self.target_config,
                                               num_actions=self.spec.num_actions, obs_levels=self.spec.stored_obs_levels)
            discounts = next_value_discounts(
                self._storage.step_index[slots], self._storage.episode_length[slots], targets.turn_passes,
                num_unroll=self.target_config.num_unroll_steps, discount=self.target_config.discount,
                discount_sign=self.spec.discount_sign, xp=np)
            targets = StochasticTrainingTarget(targets, future, discounts)
        if self._augment is not None:
            key = jax.random.PRNGKey(int(self._rng.integers(np.iinfo(np.int32).max)))
            targets = self._augment(targets, key)
        return targets, positions

    # ------------------------------------------------------------------ reanalyze

    def sample_trajectories(self, n: int) -> list[tuple[int, Trajectory]]:
        """Up to `n` distinct stored episodes, uniformly, as (trajectory_id, Trajectory) copies."""
        count = min(n, self.num_trajectories)
        ids = self._counters["oldest_id"] + self._rng.choice(self.num_trajectories, size=count, replace=False)
        out = []
        s = self._storage
        for trajectory_id in ids:
            slots = self._trajectory_slots(int(trajectory_id))
            t = s.step_index[slots]
            out.append((int(trajectory_id), Trajectory(
                obs=s.obs[slots],
                action=s.action[slots].astype(np.int32),
                reward=s.reward[slots],
                is_first=t == 0,
                is_last=t == s.episode_length[slots] - 1,
                legal_actions=self._legal_actions[slots],
                to_play=self._to_play[slots].astype(np.int32),
                root_value=s.root_value[slots],
                action_probs=s.action_probs[slots],
            )))
        return out

    def replace_search_statistics(self, trajectory_id: int, root_value, action_probs) -> None:
        """Writes reanalyzed v* [T] and p* [T, A] into a stored episode and refreshes its
        priorities (delta of every step depends on its v* and on v*_{t+N}). Does nothing
        if the episode was evicted since it was sampled."""
        if trajectory_id >= self._counters["next_id"] or trajectory_id < 0:
            raise ValueError(f"trajectory id {trajectory_id} was never stored")
        if trajectory_id < self._counters["oldest_id"]:
            return
        slots = self._trajectory_slots(trajectory_id)
        root_value = np.asarray(root_value, np.float32)
        action_probs = np.asarray(action_probs, np.float32)
        if root_value.shape != slots.shape or action_probs.shape != (slots.size, self.spec.num_actions):
            raise ValueError(f"trajectory {trajectory_id} has {slots.size} steps; got root_value "
                             f"{root_value.shape} and action_probs {action_probs.shape}")
        self._storage.root_value[slots] = root_value
        self._storage.action_probs[slots] = action_probs
        self._set_delta(slots, self._trajectory_delta(slots))

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything needed to continue exactly (storage, priorities, tree, counters, RNG)."""
        rng = self._rng.bit_generator.state
        pcg = rng["state"]
        d = {f"storage.{name}": np.array(value) for name, value in self._storage._asdict().items()}
        d.update({
            "legal_actions": self._legal_actions.copy(),
            "to_play": self._to_play.copy(),
            "delta": self._delta.copy(),
            "traj_start": self._traj_start.copy(),
            "traj_length": self._traj_length.copy(),
            "counters": np.array([self._counters[k] for k in _COUNTERS], np.int64),
            "rank_snapshot": self._rank_snapshot.copy(),
            "sampling": np.array(_SAMPLING_CODES[self.config.sampling], np.int64),
            "tree_leaves": (np.array(self._tree.leaves) if self._tree is not None
                            else np.zeros((0,), np.float64)),
            "rng": np.array([pcg["state"] >> 64, pcg["state"] & _MASK64, pcg["inc"] >> 64, pcg["inc"] & _MASK64,
                             rng["has_uint32"], rng["uinteger"]], np.uint64),
        })
        return d

    def load_state_dict(self, d: dict[str, np.ndarray]) -> None:
        """Restores `state_dict()` output. The storage shapes must match this buffer's; a
        different sampling mode rebuilds the sampling weights from the stored priorities."""
        for name, current in self._storage._asdict().items():
            saved = np.asarray(d[f"storage.{name}"])
            if saved.shape != current.shape:
                raise MooziError(f"replay checkpoint storage.{name} has shape {saved.shape}, this buffer "
                                 f"{current.shape}; use the capacity and game it was saved with")
            np.copyto(current, saved, casting="same_kind")
        for name in ("legal_actions", "to_play", "delta", "traj_start", "traj_length"):
            np.copyto(getattr(self, f"_{name}"), np.asarray(d[name]), casting="same_kind")
        self._counters = dict(zip(_COUNTERS, (int(x) for x in np.asarray(d["counters"]))))
        self._rank_snapshot = np.array(d["rank_snapshot"], np.float64)
        words = [int(x) for x in np.asarray(d["rng"], np.uint64)]
        self._rng.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": (words[0] << 64) | words[1], "inc": (words[2] << 64) | words[3]},
            "has_uint32": words[4],
            "uinteger": words[5],
        }
        if self._tree is None:
            return
        if int(d["sampling"]) == _SAMPLING_CODES[self.config.sampling]:
            self._tree.set_all(np.asarray(d["tree_leaves"], np.float64))
            return
        # Saved under another sampling mode: derive this mode's weights from delta.
        self._tree.set_all(np.zeros(self.config.capacity))
        self._rank_snapshot = np.zeros((0,), np.float64)
        live = self._live_slots()
        self._counters["changed_since_sort"] = 0
        self._set_delta(live, self._delta[live])
        self._counters["changed_since_sort"] = live.size  # forces an exact re-sort in rank mode
