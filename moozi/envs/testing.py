"""Conformance suite for env bridges and custom games (in the spirit of `pgx.api_test`).

Run it on your own game before training on it (docs/custom_game.py):

    from moozi.envs.testing import check_host_env
    check_host_env(MyGame, num_steps=200)

Every bridge's tests call `check_host_env` (OpenSpiel, MinAtar, Gymnasium, ALE)
or `check_jax_env` (pgx, gymnax). A failed check raises AssertionError. The checks are the step contract of
`moozi/envs/base.py`: exact shapes and dtypes, first/last flags, the dummy
action, reset-on-is_last, determinism from the seed and illegal-action errors.

Random legal actions come from a seeded numpy RNG, so a failure replays exactly.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT, Env, EnvSpec, JaxEnv, StepOutput
from moozi.errors import IllegalActionError

__all__ = ["check_host_env", "check_jax_env", "check_spec", "check_step_output"]


def check_spec(spec: EnvSpec) -> None:
    """The spec's fields are consistent with each other and with the contract."""
    assert isinstance(spec, EnvSpec), type(spec)
    # Bridges use library-qualified names ("openspiel:go"); registered custom games a plain name.
    assert isinstance(spec.name, str) and spec.name.strip() == spec.name != "", f"bad spec.name {spec.name!r}"
    assert isinstance(spec.obs_shape, tuple) and len(spec.obs_shape) == 3, spec.obs_shape
    assert all(isinstance(d, int) and d >= 1 for d in spec.obs_shape), spec.obs_shape
    assert isinstance(spec.num_actions, int) and spec.num_actions >= 2, spec.num_actions
    assert spec.num_players in (1, 2), spec.num_players
    if spec.max_episode_steps is not None:
        assert spec.max_episode_steps >= 1, spec.max_episode_steps
    if spec.action_names is not None:
        assert len(spec.action_names) == spec.num_actions - 1, (len(spec.action_names), spec.num_actions)
        assert all(isinstance(n, str) for n in spec.action_names)


def _scalar_dtype(x) -> np.dtype:
    arr = np.asarray(x)
    assert arr.shape == (), f"expected a scalar, got shape {arr.shape}"
    return arr.dtype


def check_step_output(out: StepOutput, spec: EnvSpec, *, batch: tuple[int, ...] = ()) -> None:
    """Exact shapes and dtypes of one (or a batch of) step output(s), and the dummy-action rule."""
    assert isinstance(out, StepOutput), type(out)
    obs = np.asarray(out.obs)
    assert obs.shape == batch + spec.obs_shape, (obs.shape, batch + spec.obs_shape)
    assert obs.dtype == np.float32, obs.dtype
    assert np.all(np.isfinite(obs)), "obs has non-finite values"
    if spec.binary_obs:
        assert np.all((obs == 0) | (obs == 1)), "spec.binary_obs but obs has values other than 0 and 1"
    if spec.obs_levels is not None:
        assert not spec.binary_obs, "set binary_obs or obs_levels, not both"
        assert 1 < spec.obs_levels <= 255, f"obs_levels {spec.obs_levels} does not fit a byte"
        scale = np.float32(1.0 / spec.obs_levels)  # as moozi.envs.base.obs_scale
        assert np.array_equal(np.rint(obs / scale) * scale, obs), f"spec.obs_levels={spec.obs_levels} but an obs value is not k/{spec.obs_levels}"
    if not batch:
        # Host envs hand numpy to the host-side loop; JAX envs may hand jax arrays.
        for name in ("is_first", "is_last"):
            assert _scalar_dtype(getattr(out, name)) == np.bool_, (name, np.asarray(getattr(out, name)).dtype)
        assert _scalar_dtype(out.reward) == np.float32, np.asarray(out.reward).dtype
        assert np.issubdtype(_scalar_dtype(out.to_play), np.integer), np.asarray(out.to_play).dtype
    for name, dtype in (("is_first", np.bool_), ("is_last", np.bool_), ("reward", np.float32)):
        arr = np.asarray(getattr(out, name))
        assert arr.shape == batch and arr.dtype == dtype, (name, arr.shape, arr.dtype)
    to_play = np.asarray(out.to_play)
    assert to_play.shape == batch and np.issubdtype(to_play.dtype, np.integer), (to_play.shape, to_play.dtype)
    if spec.num_players == 1:
        assert np.all(to_play == SINGLE_AGENT), f"single-agent to_play must be {SINGLE_AGENT}: {to_play}"
    else:
        assert np.all((to_play == 0) | (to_play == 1)), f"two-player to_play must be 0 or 1: {to_play}"
    assert np.all(np.isfinite(np.asarray(out.reward))), "reward is not finite"

    mask = np.asarray(out.legal_actions)
    assert mask.shape == batch + (spec.num_actions,) and mask.dtype == np.bool_, (mask.shape, mask.dtype)
    is_first = np.asarray(out.is_first)
    is_last = np.asarray(out.is_last)
    # Dummy action legal iff is_last; on a last step it is the only legal action.
    np.testing.assert_array_equal(mask[..., DUMMY_ACTION], is_last, err_msg="dummy action must be legal iff is_last")
    np.testing.assert_array_equal(
        mask[..., 1:].any(axis=-1), ~is_last, err_msg="a last step allows only the dummy; other steps need a legal action"
    )
    assert not np.any(is_first & is_last), "a step cannot be both first and last"
    np.testing.assert_array_equal(np.where(is_first, np.asarray(out.reward), 0.0), 0.0, err_msg="reward on is_first must be 0")


def _random_legal(rng: np.random.Generator, mask) -> int:
    return int(rng.choice(np.flatnonzero(np.asarray(mask))))


def _host_rollout(env: Env, *, seed: int, num_steps: int) -> list[StepOutput]:
    """Random legal play from reset(seed) for num_steps steps, checking every transition."""
    rng = np.random.default_rng(seed)
    out = env.reset(seed=seed)
    check_step_output(out, env.spec)
    assert bool(out.is_first) and not bool(out.is_last), "reset must return a first step"
    outputs = [out]
    episode_len = 0
    for _ in range(num_steps):
        action = _random_legal(rng, out.legal_actions)
        was_last = bool(out.is_last)
        out = env.step(action, was_last)
        check_step_output(out, env.spec)
        # The env resets itself on is_last and otherwise continues the episode.
        assert bool(out.is_first) == was_last, (was_last, bool(out.is_first))
        episode_len = 0 if was_last else episode_len + 1
        if env.spec.max_episode_steps is not None:
            assert episode_len <= env.spec.max_episode_steps, (episode_len, env.spec.max_episode_steps)
        outputs.append(out)
    return outputs


def _assert_same_outputs(a: list[StepOutput], b: list[StepOutput], what: str) -> None:
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b)):
        for field in StepOutput._fields:
            np.testing.assert_array_equal(
                np.asarray(getattr(x, field)), np.asarray(getattr(y, field)), err_msg=f"{what}: step {t}, field {field}"
            )


def check_host_env(make: Callable[[], Env], *, seed: int = 0, num_steps: int = 300) -> None:
    """Runs the host-env conformance checks on envs built by `make()`."""
    env = make()
    assert isinstance(env, Env), f"{type(env)} does not satisfy the Env protocol"
    check_spec(env.spec)

    first = _host_rollout(env, seed=seed, num_steps=num_steps)
    # Reseeding the same env replays the episode exactly ...
    again = _host_rollout(env, seed=seed, num_steps=num_steps)
    _assert_same_outputs(first, again, "reset(seed) on the same env")
    # ... and so does a fresh env with the same seed.
    other = make()
    _assert_same_outputs(first, _host_rollout(other, seed=seed, num_steps=num_steps), "a fresh env with the same seed")

    # step(anything, is_last=True) resets, whatever the action (thesis Algorithm 1).
    rng = np.random.default_rng(seed + 1)
    out = other.step(int(rng.integers(env.spec.num_actions)), True)
    check_step_output(out, env.spec)
    assert bool(out.is_first) and not bool(out.is_last)

    # Illegal actions raise and name the action: the dummy on a non-last step,
    # an index past the action space, and any action the mask forbids.
    out = env.reset(seed=seed)
    illegal = [DUMMY_ACTION, env.spec.num_actions]
    forbidden = np.flatnonzero(~np.asarray(out.legal_actions)[1:]) + 1
    if forbidden.size:
        illegal.append(int(forbidden[0]))
    for action in illegal:
        try:
            env.step(action, False)
        except IllegalActionError as error:
            assert str(action) in str(error), f"the error must name action {action}: {error}"
            assert "\n" not in str(error), "MooziError messages are one line"
        else:
            raise AssertionError(f"illegal action {action} did not raise IllegalActionError")
    # A refused action leaves the env where it was.
    out = env.step(_random_legal(rng, out.legal_actions), False)
    check_step_output(out, env.spec)
    assert not bool(out.is_first)

    env.close()
    other.close()


def _tree_assert_equal(x, y, what: str) -> None:
    leaves_x, tree_x = jax.tree_util.tree_flatten(x)
    leaves_y, tree_y = jax.tree_util.tree_flatten(y)
    assert tree_x == tree_y, f"{what}: different structures"
    for i, (a, b) in enumerate(zip(leaves_x, leaves_y)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (what, i, a.shape, b.shape, a.dtype, b.dtype)
        if np.issubdtype(a.dtype, np.floating):
            # XLA may fuse float ops differently under jit; everything else must match exactly.
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"{what}: leaf {i}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{what}: leaf {i}")


def _jax_rollout(env: JaxEnv, step_fn, *, seed: int, num_steps: int) -> list[StepOutput]:
    rng = np.random.default_rng(seed)
    key, init_key = jax.random.split(jax.random.PRNGKey(seed))
    state, out = env.init(init_key)
    check_step_output(out, env.spec)
    assert bool(out.is_first) and not bool(out.is_last), "init must return a first step"
    outputs = [out]
    for _ in range(num_steps):
        action = _random_legal(rng, out.legal_actions)
        was_last = bool(out.is_last)
        key, step_key = jax.random.split(key)
        state, out = step_fn(state, jnp.int32(action), jnp.bool_(was_last), step_key)
        check_step_output(out, env.spec)
        assert bool(out.is_first) == was_last, (was_last, bool(out.is_first))
        outputs.append(out)
    return outputs


def check_jax_env(env: JaxEnv, *, seed: int = 0, num_steps: int = 100, batch_size: int = 3) -> None:
    """Runs the JAX-env conformance checks: contract, determinism, jit and vmap agreement."""
    assert isinstance(env, JaxEnv), f"{type(env)} does not satisfy the JaxEnv protocol"
    check_spec(env.spec)
    step = jax.jit(env.step)

    first = _jax_rollout(env, step, seed=seed, num_steps=num_steps)
    _assert_same_outputs(first, _jax_rollout(env, step, seed=seed, num_steps=num_steps), "same seed")

    # jit agrees with eager execution (a few steps: eager pgx/gymnax is slow).
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(seed)
    state, out = env.init(key)
    _tree_assert_equal((state, out), jax.jit(env.init)(key), "jit(init) vs init")
    for t in range(min(num_steps, 4)):
        key, step_key = jax.random.split(key)
        args = (state, jnp.int32(_random_legal(rng, out.legal_actions)), jnp.bool_(out.is_last), step_key)
        eager = env.step(*args)
        jitted = step(*args)
        _tree_assert_equal(eager, jitted, f"jit(step) vs step at step {t}")
        state, out = jitted
    # Forcing is_last resets, whatever the action.
    key, step_key = jax.random.split(key)
    _, out = step(state, jnp.int32(env.spec.num_actions - 1), jnp.bool_(True), step_key)
    check_step_output(out, env.spec)
    assert bool(out.is_first) and not bool(out.is_last)

    # vmap over a small batch equals the unbatched results element by element.
    keys = jax.random.split(jax.random.PRNGKey(seed + 1), batch_size)
    states, outs = jax.vmap(env.init)(keys)
    check_step_output(outs, env.spec, batch=(batch_size,))
    vstep = jax.jit(jax.vmap(env.step))
    singles = [env.init(k) for k in keys]
    for i, single in enumerate(singles):
        _tree_assert_equal(jax.tree_util.tree_map(lambda x: x[i], (states, outs)), single, f"vmap(init)[{i}]")
    for t in range(min(num_steps, 8)):
        actions = jnp.asarray([_random_legal(rng, m) for m in np.asarray(outs.legal_actions)], jnp.int32)
        is_last = jnp.asarray(outs.is_last)
        step_keys = jax.random.split(jax.random.PRNGKey(seed + 2 + t), batch_size)
        states, outs = vstep(states, actions, is_last, step_keys)
        check_step_output(outs, env.spec, batch=(batch_size,))
        singles = [step(s, actions[i], is_last[i], step_keys[i]) for i, (s, _) in enumerate(singles)]
        for i, single in enumerate(singles):
            _tree_assert_equal(jax.tree_util.tree_map(lambda x: x[i], (states, outs)), single, f"vmap(step)[{i}] at step {t}")
