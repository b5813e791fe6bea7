"""The Gymnasium and Atari bridges against Gymnasium itself (CartPole, MountainCar, FrozenLake, Pong)."""

from __future__ import annotations

import functools

import ale_py
import gymnasium
import numpy as np
import pytest
from gymnasium.wrappers import AtariPreprocessing

import moozi.envs.testing as conformance
from moozi.envs import gym as bridge
from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT
from moozi.errors import IllegalActionError, MooziError, UnknownGameError, UnsupportedGameError

# ------------------------------------------------------------------- gym:


def test_cartpole_spec():
    spec = bridge.make_gym("CartPole-v1").spec
    assert spec.name == "gym:CartPole-v1"
    assert spec.obs_shape == (1, 1, 4)
    assert spec.num_actions == 3
    assert spec.num_players == 1
    assert not spec.binary_obs
    assert spec.max_episode_steps == 500
    assert spec.action_names is None


def test_cartpole_conformance():
    conformance.check_host_env(functools.partial(bridge.make_gym, "CartPole-v1"), seed=0, num_steps=300)


def test_cartpole_matches_gymnasium():
    """Same seed, same actions: obs, rewards and episode ends are Gymnasium's own."""
    env = bridge.make_gym("CartPole-v1")
    ref = gymnasium.make("CartPole-v1")
    out = env.reset(seed=5)
    ref_obs, _ = ref.reset(seed=5)
    rng = np.random.default_rng(1)
    episodes = 0
    for _ in range(200):
        np.testing.assert_array_equal(out.obs, ref_obs.reshape(1, 1, 4))
        if out.is_last:
            out = env.step(DUMMY_ACTION, True)
            ref_obs, _ = ref.reset()
            episodes += 1
            continue
        action = int(rng.integers(1, 3))
        out = env.step(action, False)
        ref_obs, reward, terminated, truncated, _ = ref.step(action - 1)
        assert out.reward == np.float32(reward) and out.reward.dtype == np.float32
        assert bool(out.is_last) == (terminated or truncated)
        assert out.to_play == SINGLE_AGENT
    assert episodes >= 3


def test_time_limit_truncation_is_the_episode_end():
    """MountainCar never reaches the flag at random: Gymnasium's TimeLimit (200) ends every episode."""
    env = bridge.make_gym("MountainCar-v0", seed=0)
    assert env.spec.max_episode_steps == 200
    out = env.reset()
    steps = 0
    while not out.is_last:
        out = env.step(1 + steps % 3, False)
        steps += 1
    assert steps == 200
    np.testing.assert_array_equal(out.legal_actions, [True, False, False, False])
    with pytest.raises(IllegalActionError, match="the episode has ended"):
        env.step(1, False)
    assert env.step(1, True).is_first


def test_seed_option_seeds_the_first_reset_only():
    a = bridge.make_gym("CartPole-v1", seed=4)
    b = bridge.make_gym("CartPole-v1")
    np.testing.assert_array_equal(a.reset().obs, b.reset(seed=4).obs)
    first = a.reset().obs  # continues the seeded stream: a new start, not the seeded one again
    assert not np.array_equal(first, b.reset(seed=4).obs)
    # An explicit reset(seed) before the first reset replaces the option for good.
    c = bridge.make_gym("CartPole-v1", seed=4)
    c.reset(seed=9)
    b.reset(seed=9)
    np.testing.assert_array_equal(c.reset().obs, b.reset().obs)


def test_max_episode_steps_option():
    env = bridge.make_gym("MountainCar-v0", max_episode_steps=3, seed=0)
    assert env.spec.max_episode_steps == 3
    out = env.reset()
    flags = []
    for _ in range(4):
        out = env.step(1, bool(out.is_last))
        flags.append((bool(out.is_first), bool(out.is_last)))
    assert flags == [(False, False), (False, False), (False, True), (True, False)]


def test_discrete_observations_are_one_hot():
    env = bridge.make_gym("FrozenLake-v1", seed=0)
    assert env.spec.obs_shape == (1, 1, 16) and env.spec.binary_obs and env.spec.num_actions == 5
    out = env.reset()
    expected = np.zeros((1, 1, 16), np.float32)
    expected[0, 0, 0] = 1.0  # FrozenLake starts in the top-left cell
    np.testing.assert_array_equal(out.obs, expected)


def test_uint8_images_keep_their_shape_and_scale_to_unit_range():
    env = bridge.make_gym("ALE/Pong-v5", seed=0)
    assert env.spec.obs_shape == (210, 160, 3) and env.spec.num_actions == 7
    out = env.reset()
    ref = gymnasium.make("ALE/Pong-v5")
    ref_obs, _ = ref.reset(seed=0)
    # k * float32(1/255): the product a jitted decoder of the stored bytes reproduces bit for bit.
    np.testing.assert_array_equal(out.obs, ref_obs.astype(np.float32) * np.float32(1.0 / 255.0))
    np.testing.assert_allclose(out.obs, ref_obs / 255.0, rtol=1e-6)
    assert out.obs.dtype == np.float32 and out.obs.max() <= 1.0
    assert env.spec.obs_levels == 255 and not env.spec.binary_obs  # replay keeps the bytes


def test_gym_errors():
    with pytest.raises(UnknownGameError) as info:
        bridge.make_gym("CartPol-v1")
    assert "did you mean gym:CartPole-v1, gym:CartPole-v0?" in str(info.value)
    with pytest.raises(UnsupportedGameError, match=r"gym:Pendulum-v1 is not supported: its action space is Box"):
        bridge.make_gym("Pendulum-v1")
    with pytest.raises(UnsupportedGameError, match=r"gym:Blackjack-v1 is not supported: its observation space is Tup"):
        bridge.make_gym("Blackjack-v1")
    with pytest.raises(UnsupportedGameError, match="JAX-functional"):
        bridge.make_gym("phys2d/CartPole-v1")
    with pytest.raises(MooziError, match=r"bad option\(s\) foo for gym:CartPole-v1: .*'foo'") as info:
        bridge.make_gym("CartPole-v1", foo=1)
    assert str(info.value).endswith("moozi's options: seed, max_episode_steps")
    env = bridge.make_gym("CartPole-v1", seed=0)
    env.reset()
    for action in (DUMMY_ACTION, 3):
        with pytest.raises(IllegalActionError) as info:
            env.step(action, False)
        assert str(info.value) == f"action {action} is illegal in gym:CartPole-v1; legal: [1, 2]"


def test_known_gym_games_leave_out_atari_and_jax_envs():
    games = bridge.known_gym_games()
    assert {"CartPole-v1", "MountainCar-v0", "Acrobot-v1", "FrozenLake-v1"} <= set(games)
    assert not [g for g in games if g.startswith(("ALE/", "phys2d/", "tabular/"))]


# ----------------------------------------------------------------- atari:


def _reference_pong(full_action_space: bool = False) -> gymnasium.Env:
    """Machado et al.'s protocol written directly with Gymnasium's own wrappers."""
    gymnasium.register_envs(ale_py)
    env = gymnasium.make(
        "ALE/Pong-v5", frameskip=1, repeat_action_probability=0.25, full_action_space=full_action_space
    )
    return AtariPreprocessing(env, noop_max=0, frame_skip=4, screen_size=84, terminal_on_life_loss=False)


def test_pong_spec_and_names():
    spec = bridge.make_atari("pong").spec
    assert spec.name == "atari:pong"
    assert spec.obs_shape == (84, 84, 1)
    assert spec.num_actions == 7
    assert spec.action_names == ("NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE")
    assert spec.max_episode_steps == 27_000  # 108,000 frames / frame skip 4
    assert not spec.binary_obs and spec.num_players == 1
    assert bridge.make_atari("pong", full_action_space=True).spec.num_actions == 19
    for alias in ("ALE/Pong-v5", "Pong"):
        assert bridge.make_atari(alias).spec.name == "atari:pong"
    assert bridge.make_atari("SpaceInvaders").spec.name == "atari:space_invaders"


def test_pong_matches_gymnasium_preprocessing():
    env = bridge.make_atari("pong")
    ref = _reference_pong()
    out = env.reset(seed=3)
    ref_obs, _ = ref.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(30):
        assert out.obs.dtype == np.float32 and out.obs.shape == (84, 84, 1)
        np.testing.assert_allclose(out.obs, ref_obs[..., None] / 255.0, rtol=0, atol=1e-7)
        action = int(rng.integers(1, 7))
        out = env.step(action, False)
        ref_obs, reward, terminated, truncated, _ = ref.step(action - 1)
        assert out.reward == np.float32(reward)
        assert bool(out.is_last) == (terminated or truncated)
    assert 0.0 <= out.obs.min() and out.obs.max() <= 1.0 and out.obs.max() > 0.0


def test_pong_sticky_actions_are_on_by_default():
    env = bridge.make_atari("pong")
    ale = env.gym_env.unwrapped.ale
    assert ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    env = bridge.make_atari("pong", sticky_action_prob=0.0)
    assert env.gym_env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0


def test_pong_conformance():
    conformance.check_host_env(functools.partial(bridge.make_atari, "pong"), seed=0, num_steps=100)


def test_atari_errors_and_known_games():
    with pytest.raises(UnknownGameError, match=r"did you mean atari:pong\?"):
        bridge.make_atari("pongg")
    with pytest.raises(UnsupportedGameError, match="ALE v5"):
        bridge.make_atari("ALE/Pong-v4")
    with pytest.raises(MooziError, match=r"unknown option\(s\) frameskip for atari:pong; allowed: seed, full_"):
        bridge.make_atari("pong", frameskip=2)
    games = bridge.known_atari_games()
    assert {"pong", "breakout", "space_invaders", "montezuma_revenge"} <= set(games)
    assert "combat" not in games  # ale-py registers no single-player v5 env for it
