"""Training targets gathered from flat step storage (thesis 5.2.8).

The thesis precomputes every target when a trajectory arrives. Targets
overlap heavily (each frame appears in L + 1 history windows, each reward in
K + N returns), so we store every step once and gather a target by index at
sample time instead: memory is one copy of the data, and a reanalyze update of
v*/p* is visible to every target at once.

Conventions (step t of an episode of length T):
  o_t, r_t (reward for arriving at o_t, 0 at t = 0), a_t (action chosen at
  o_t, dummy 0 at t = T - 1), v*_t, p*_t.
A target at step t reads, by offset from t:
  frames  o_{t-L+1} .. o_{t+1}           history at t and at t + 1
  actions a_{t-L} .. a_{t+K-1}           history actions and the K unroll actions
  rewards r_{t+1} .. r_{t+K+N}           unroll rewards and the N-step returns
  values  v*_t .. v*_{t+K}, v*_{t+N} .. v*_{t+N+K}
  probs   p*_t .. p*_{t+K}
Offsets outside 0 .. T-1 read whatever sits in the neighbouring slots and are
masked afterwards: zero frames and dummy actions before the start (5.2.4),
absorbing steps after the end (dummy action, zero reward and value, policy
loss masked).

N-step return (d = gamma for one player, -gamma for two-player zero-sum,
because values are from the player to move and rewards from the player who
just acted):
  G^N_t = sum_{i<N} d^i r_{t+i+1} + d^N v*_{t+N}
In games where a player may move several times in a row (pgx's backgammon
plays one die per step) the sign is per step instead: s_t = -1 where the
player to move changes between t and t + 1, +1 where it does not, read from
the stored `to_play` (`turn_signs`), and
  G^N_t = sum_{i<N} gamma^i (s_t .. s_{t+i-1}) r_{t+i+1} + gamma^N (s_t .. s_{t+N-1}) v*_{t+N}.
The bootstrap term is 0 when t + N >= T - 1: the last state is terminal, so
its value is 0 whatever the search said there. A time-limit truncation is
treated as terminal too (we cannot tell it apart from the trajectory alone;
bootstrapping from a truncated state would need the value of a state that was
never searched), which biases values down near the limit in games that have
one.

The index arithmetic (`gather_window`) works with numpy or jax.numpy, so the
replay buffer can gather rows on the host while `make_targets` stays one pure,
jittable function; the maths (`assemble_targets`) always runs under jit.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from moozi.core.types import Array, TrainingTarget
from moozi.envs.base import DUMMY_ACTION, decode_obs
from moozi.errors import MooziError
from moozi.core.history import stack_history


class BootstrapSource(enum.Enum):
    """Where the value at the end of an N-step return comes from."""

    SEARCH = "search"  # the stored root value v*_{t+N}
    TARGET_NETWORK = "target_network"  # the learner's target network on bootstrap_stacked_obs


@dataclasses.dataclass(frozen=True)
class TargetConfig:
    """How trajectories become training targets (thesis 5.2.8). Whether the game
    is two-player comes from the EnvSpec (`discount_sign`), not from here."""

    history_length: int = 1
    """L: frames (and previous actions) stacked into the representation input (5.2.6)."""
    num_unroll_steps: int = 5
    """K: dynamics steps unrolled in training; a target carries K actions and K + 1 policy/value targets."""
    td_steps: int = 10
    """N: steps before bootstrapping. Board games use N >= the longest episode (a Monte-Carlo
    return); the gather costs O(K + N) per target, so don't make it larger than needed."""
    discount: float = 0.997
    """gamma in [0, 1]; the two-player sign is applied on top of it."""
    bootstrap_from: BootstrapSource = BootstrapSource.SEARCH
    """SEARCH: bootstrap_value is the stored v*. TARGET_NETWORK: additionally gather
    bootstrap_stacked_obs so the learner can evaluate the bootstrap state itself."""

    def __post_init__(self):
        # Config files give the enum by its value; accept that and keep the enum.
        try:
            object.__setattr__(self, "bootstrap_from", BootstrapSource(self.bootstrap_from))
        except ValueError:
            allowed = ", ".join(s.value for s in BootstrapSource)
            raise MooziError(f"bootstrap_from={self.bootstrap_from!r}; allowed: {allowed}") from None
        for name in ("history_length", "td_steps"):
            if getattr(self, name) < 1:
                raise MooziError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_unroll_steps < 0:
            raise MooziError(f"num_unroll_steps must be >= 0, got {self.num_unroll_steps}")
        if not 0.0 <= self.discount <= 1.0:
            raise MooziError(f"discount must lie in [0, 1], got {self.discount}")


class StepStorage(NamedTuple):
    """Flat step storage [S slots]. A trajectory occupies consecutive slots
    (modulo S, so it may wrap around the end); slot s holds step `step_index[s]`
    of an episode of length `episode_length[s]`."""

    obs: Array  # [S, H, W, C] uint8 (binary obs or 8-bit frames, EnvSpec.obs_levels) or float32
    action: Array  # [S] integer: a_t
    reward: Array  # [S] float32: r_t
    root_value: Array  # [S] float32: v*_t
    action_probs: Array  # [S, A] float32: p*_t
    step_index: Array  # [S] int32: t
    episode_length: Array  # [S] int32: T


class TargetWindow(NamedTuple):
    """The raw storage rows one batch of targets reads, before masking. Leading axis [B]."""

    step_index: Array  # [B] t
    episode_length: Array  # [B] T
    frames: Array  # [B, L+1, H, W, C] o_{t-L+1} .. o_{t+1}
    actions: Array  # [B, L+max(K,1)] a_{t-L} .. a_{t+max(K,1)-1}
    rewards: Array  # [B, K+N] r_{t+1} .. r_{t+K+N}
    root_values: Array  # [B, K+1] v*_t .. v*_{t+K}
    bootstrap_values: Array  # [B, K+1] v*_{t+N} .. v*_{t+N+K}
    action_probs: Array  # [B, K+1, A] p*_t .. p*_{t+K}
    bootstrap_frames: Array | None = None  # [B, L+K, H, W, C] o_{t+N-L+1} .. o_{t+N+K}
    bootstrap_actions: Array | None = None  # [B, L+K] a_{t+N-L} .. a_{t+N+K-1}


@dataclasses.dataclass(frozen=True)
class _Offsets:
    """Offsets from t of every row a target reads (static: they depend only on the config)."""

    frames: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    values: np.ndarray
    bootstrap_values: np.ndarray
    bootstrap_frames: np.ndarray
    bootstrap_actions: np.ndarray


def _offsets(config: TargetConfig) -> _Offsets:
    L, K, N = config.history_length, config.num_unroll_steps, config.td_steps
    return _Offsets(
        frames=np.arange(-L + 1, 2),
        # a_{t-L} .. a_{t+K-1}, and at least a_t: the next step's history input needs it even when K = 0.
        actions=np.arange(-L, max(K, 1)),
        rewards=np.arange(1, K + N + 1),
        values=np.arange(0, K + 1),
        bootstrap_values=np.arange(N, N + K + 1),
        bootstrap_frames=np.arange(N - L + 1, N + K + 1),
        bootstrap_actions=np.arange(N - L, N + K),
    )


def gather_window(storage: StepStorage, indices, config: TargetConfig, xp: Any = jnp) -> TargetWindow:
    """Reads the rows for targets at slots `indices` [B]; `xp` is numpy or jax.numpy.

    Reads wrap around the storage, so out-of-episode offsets land on some other
    slot; `assemble_targets` masks them using t and T.
    """
    num_slots = storage.step_index.shape[0]
    off = _offsets(config)

    def rows(field, offsets):
        slots = (indices[:, None] + xp.asarray(offsets)[None, :]) % num_slots  # [B, J]
        return field[slots]

    target_network = config.bootstrap_from is BootstrapSource.TARGET_NETWORK
    return TargetWindow(
        step_index=storage.step_index[indices],
        episode_length=storage.episode_length[indices],
        frames=rows(storage.obs, off.frames),
        actions=rows(storage.action, off.actions),
        rewards=rows(storage.reward, off.rewards),
        root_values=rows(storage.root_value, off.values),
        bootstrap_values=rows(storage.root_value, off.bootstrap_values),
        action_probs=rows(storage.action_probs, off.values),
        bootstrap_frames=rows(storage.obs, off.bootstrap_frames) if target_network else None,
        bootstrap_actions=rows(storage.action, off.bootstrap_actions) if target_network else None,
    )


def _return_weights(num_targets: int, td_steps: int, d: float) -> np.ndarray:
    """[num_targets + N - 1, num_targets] with W[j, k] = d^(j-k) for 0 <= j - k < N, so that
    rewards r_{t+1..} @ W gives every target's discounted N-step reward sum at once."""
    j = np.arange(num_targets + td_steps - 1)[:, None]
    k = np.arange(num_targets)[None, :]
    lag = j - k
    inside = (lag >= 0) & (lag < td_steps)
    return np.where(inside, np.float32(d) ** np.clip(lag, 0, None).astype(np.float32), 0.0).astype(np.float32)


def n_step_return_parts(rewards, bootstrap_values, bootstrap_valid, *, td_steps: int, discount: float,
                        discount_sign: float, xp: Any = jnp, turn_signs=None):
    """Splits G^N into (partial_return, bootstrap_discount, bootstrap_value), each [B, J].

    rewards [B, J+N-1]: r_{t+1} .. r_{t+J+N-1}, already 0 past the episode end.
    bootstrap_values [B, J]: v*_{t+j+N}; bootstrap_valid [B, J]: t+j+N < T-1 (non-terminal).
    turn_signs [B, J+N-1]: s_t .. s_{t+J+N-2} (see the module docstring), replacing
    `discount_sign` where given.
    Shared by make_targets (jnp, under jit) and the buffer's insertion priorities
    (numpy), so both compute the same return.
    """
    num_targets = bootstrap_values.shape[-1]
    bootstrap_value = xp.where(bootstrap_valid, bootstrap_values, 0.0).astype(xp.float32)
    if turn_signs is not None:
        # With prefix products P_m = s_t .. s_{t+m-1} (P_0 = 1), the signs between t+j and t+j+i
        # are P_{j+i} P_j (each is +-1): sign every reward and bootstrap by P from t, discount
        # with gamma alone, and turn each target back to its own player's view with P_j.
        signs = xp.asarray(turn_signs, xp.float32)
        prefix = xp.concatenate([xp.ones_like(signs[:, :1]), xp.cumprod(signs, axis=-1)], axis=-1)  # [B, J+N]
        weights = _return_weights(num_targets, td_steps, discount)
        signed_rewards = xp.asarray(rewards, xp.float32) * prefix[:, :-1]
        partial = prefix[:, :num_targets] * (signed_rewards @ xp.asarray(weights))
        flips = prefix[:, :num_targets] * prefix[:, td_steps:td_steps + num_targets]
        bootstrap_discount = xp.where(bootstrap_valid, np.float32(discount) ** td_steps * flips, 0.0)
        return partial.astype(xp.float32), bootstrap_discount.astype(xp.float32), bootstrap_value
    d = discount_sign * discount
    weights = _return_weights(num_targets, td_steps, d)  # [J+N-1, J]
    partial = xp.asarray(rewards, xp.float32) @ xp.asarray(weights)  # [B, J]
    bootstrap_discount = xp.where(bootstrap_valid, np.float32(d) ** td_steps, 0.0).astype(xp.float32)
    return partial, bootstrap_discount, bootstrap_value


def turn_signs(to_play, xp: Any = jnp):
    """s_m [..., M-1] from to_play [..., M]: -1 where the player to move changes from step m to m+1."""
    to_play = xp.asarray(to_play)
    return xp.where(to_play[..., 1:] == to_play[..., :-1], 1.0, -1.0).astype(xp.float32)


def turn_sign_offsets(config: TargetConfig) -> np.ndarray:
    """Offsets from t of the `to_play` rows a target's `turn_signs` come from: t .. t+K+N."""
    return np.arange(0, config.num_unroll_steps + config.td_steps + 1)


def _inside(t, T, offsets, xp):
    pos = t[:, None] + xp.asarray(offsets)[None, :]  # [B, J]
    return (pos >= 0) & (pos < T[:, None])


def assemble_targets(window: TargetWindow, *, config: TargetConfig, num_actions: int, discount_sign: float,
                     importance_weight=None, obs_levels: int | None = None, to_play=None) -> TrainingTarget:
    """Masks the gathered rows and builds the TrainingTarget (pure, jittable).

    `importance_weight` [B] defaults to 1 (the buffer passes its own). Stored
    frames are decoded with `obs_levels` (`EnvSpec.stored_obs_levels`).
    `to_play` [B, K+N+1] (rows at `turn_sign_offsets`): games whose turns need
    not alternate; the returns then take their signs step by step from it.
    """
    L, K, N = config.history_length, config.num_unroll_steps, config.td_steps
    off = _offsets(config)
    t = jnp.asarray(window.step_index, jnp.int32)  # [B]
    T = jnp.asarray(window.episode_length, jnp.int32)  # [B]
    batch = t.shape[0]

    def frames_masked(frames, offsets):
        valid = _inside(t, T, offsets, jnp)  # [B, J]
        return jnp.where(valid[..., None, None, None], decode_obs(frames, obs_levels, jnp), 0.0)

    def actions_masked(actions, offsets):
        return jnp.where(_inside(t, T, offsets, jnp), jnp.asarray(actions, jnp.int32), DUMMY_ACTION)

    frames = frames_masked(window.frames, off.frames)  # [B, L+1, H, W, C]
    actions = actions_masked(window.actions, off.actions)  # [B, L+max(K,1)]
    stacked_obs = stack_history(frames[:, :L], actions[:, :L], num_actions)
    next_stacked_obs = stack_history(frames[:, 1:], actions[:, 1 : L + 1], num_actions)

    rewards = jnp.where(_inside(t, T, off.rewards, jnp), jnp.asarray(window.rewards, jnp.float32), 0.0)
    in_episode = _inside(t, T, off.values, jnp)  # [B, K+1]: t+k <= T-1
    root_values = jnp.where(in_episode, jnp.asarray(window.root_values, jnp.float32), 0.0)
    # Past the end the target is the one-hot dummy (the absorbing policy); it is
    # masked out of the loss anyway, but a learner that ignores the mask still
    # learns the right thing.
    dummy = jax.nn.one_hot(DUMMY_ACTION, num_actions, dtype=jnp.float32)
    action_probs = jnp.where(in_episode[..., None], jnp.asarray(window.action_probs, jnp.float32), dummy)

    bootstrap_pos = t[:, None] + jnp.asarray(off.bootstrap_values)[None, :]  # [B, K+1]
    bootstrap_valid = bootstrap_pos < T[:, None] - 1  # the last state is terminal: value 0
    signs = None if to_play is None else turn_signs(to_play)  # [B, K+N]: s_t .. s_{t+K+N-1}
    partial, bootstrap_discount, bootstrap_value = n_step_return_parts(
        rewards, window.bootstrap_values, bootstrap_valid, td_steps=N, discount=config.discount,
        discount_sign=discount_sign, xp=jnp, turn_signs=signs)
    # Past the end the turn targets are masked by the loss.
    turn_passes = None if signs is None else (signs[:, :K] < 0).astype(jnp.float32)

    bootstrap_stacked_obs = None
    if config.bootstrap_from is BootstrapSource.TARGET_NETWORK:
        b_frames = frames_masked(window.bootstrap_frames, off.bootstrap_frames)  # [B, L+K, H, W, C]
        b_actions = actions_masked(window.bootstrap_actions, off.bootstrap_actions)  # [B, L+K]
        windows = np.arange(K + 1)[:, None] + np.arange(L)[None, :]  # [K+1, L]: history k = rows k..k+L-1
        bootstrap_stacked_obs = stack_history(b_frames[:, windows], b_actions[:, windows], num_actions)

    if importance_weight is None:
        importance_weight = jnp.ones((batch,), jnp.float32)
    return TrainingTarget(
        stacked_obs=stacked_obs,
        next_stacked_obs=next_stacked_obs,
        actions=actions[:, L:L + K],
        rewards=rewards[:, :K],
        action_probs=action_probs,
        policy_mask=in_episode.astype(jnp.float32),
        root_values=root_values,
        partial_return=partial,
        bootstrap_discount=bootstrap_discount,
        bootstrap_value=bootstrap_value,
        consistency_mask=(t + 1 < T).astype(jnp.float32),
        importance_weight=jnp.asarray(importance_weight, jnp.float32),
        bootstrap_stacked_obs=bootstrap_stacked_obs,
        turn_passes=turn_passes,
    )


def make_targets(storage: StepStorage, indices, *, config: TargetConfig, num_actions: int,
                 discount_sign: float) -> TrainingTarget:
    """Targets for the steps at slots `indices` [B] (pure, jittable; importance_weight = 1).

    Jit with `static_argnames=("config", "num_actions", "discount_sign")`.
    """
    storage = StepStorage(*(jnp.asarray(field) for field in storage))
    window = gather_window(storage, jnp.asarray(indices, jnp.int32), config, xp=jnp)
    return assemble_targets(window, config=config, num_actions=num_actions, discount_sign=discount_sign)


def n_step_returns(target: TrainingTarget, bootstrap_value=None):
    """G^N_{t+k} [B, K+1] from a target; `bootstrap_value` overrides the stored v* (target network)."""
    value = target.bootstrap_value if bootstrap_value is None else bootstrap_value
    return target.partial_return + target.bootstrap_discount * value


def trajectory_value_difference(reward, root_value, *, config: TargetConfig, discount_sign: float,
                                to_play=None) -> np.ndarray:
    """delta_t = |v*_t - G^N_t| [T] for every step of one trajectory (host, numpy).

    The buffer's initial priorities (thesis 5.2.16); the same return code as
    `make_targets`, run with numpy so that trajectories of every length share
    it without a recompilation per length. `to_play` [T]: per-step signs, as in
    `assemble_targets`.
    """
    reward = np.asarray(reward, np.float32)  # [T]
    root_value = np.asarray(root_value, np.float32)  # [T]
    length = reward.shape[0]
    N = config.td_steps
    t = np.arange(length)
    # Rewards r_{t+1} .. r_{t+N} (0 past the end) and v*_{t+N} where not terminal.
    pos = t[:, None] + np.arange(1, N + 1)[None, :]  # [T, N]
    rewards = np.where(pos < length, reward[np.minimum(pos, length - 1)], 0.0)
    bootstrap_pos = t + N  # [T]
    bootstrap_valid = bootstrap_pos < length - 1
    bootstrap_values = root_value[np.minimum(bootstrap_pos, length - 1)]
    signs = None
    if to_play is not None:
        # s_t .. s_{t+N-1}; past the end they meet only zero rewards and an invalid bootstrap.
        step_signs = np.append(turn_signs(np.asarray(to_play), xp=np), 1.0)  # [T]
        sign_pos = t[:, None] + np.arange(N)[None, :]  # [T, N]
        signs = np.where(sign_pos < length, step_signs[np.minimum(sign_pos, length - 1)], 1.0)
    partial, discount, value = n_step_return_parts(
        rewards, bootstrap_values[:, None], bootstrap_valid[:, None], td_steps=N, discount=config.discount,
        discount_sign=discount_sign, xp=np, turn_signs=signs)
    returns = (partial + discount * value)[:, 0]
    return np.abs(root_value - returns)
