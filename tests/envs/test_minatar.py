"""The MinAtar bridge against MinAtar itself: spec, protocol options, seeding, episode ends, errors."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from minatar import Environment

import moozi.envs.testing as conformance
from moozi.envs import minatar
from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT
from moozi.errors import IllegalActionError, MooziError, UnknownGameError

# (channels, minimal action names) of each game in MinAtar 1.0.15.
EXPECTED = {
    "asterix": (4, ("noop", "left", "up", "right", "down")),
    "breakout": (4, ("noop", "left", "right")),
    "freeway": (7, ("noop", "up", "down")),
    "seaquest": (10, ("noop", "left", "up", "right", "down", "fire")),
    "space_invaders": (6, ("noop", "left", "right", "fire")),
}


def test_known_games():
    assert minatar.known_games() == ["asterix", "breakout", "freeway", "seaquest", "space_invaders"]


@pytest.mark.parametrize("game", sorted(EXPECTED))
def test_spec(game):
    channels, names = EXPECTED[game]
    spec = minatar.make(game).spec
    assert spec.name == f"minatar:{game}"
    assert spec.obs_shape == (10, 10, channels)
    assert spec.num_actions == len(names) + 1
    assert spec.action_names == names
    assert spec.num_players == 1 and spec.binary_obs
    assert spec.max_episode_steps == (2501 if game == "freeway" else None)
    full = minatar.make(game, full_action_space=True).spec
    assert full.num_actions == 7
    assert full.action_names == ("noop", "left", "up", "right", "down", "fire")


@pytest.mark.parametrize("game", sorted(EXPECTED))
def test_conformance(game):
    conformance.check_host_env(functools.partial(minatar.make, game), seed=0, num_steps=300)


@pytest.mark.parametrize("full_action_space", [False, True])
def test_matches_minatar_with_sticky_actions(full_action_space):
    """Same seed, same actions: the bridge reproduces MinAtar's own loop (sticky 0.1) exactly."""
    env = minatar.make("space_invaders", full_action_space=full_action_space)
    out = env.reset(seed=11)
    ref = Environment("space_invaders", sticky_action_prob=0.1)
    ref.seed(11)
    ref.reset()
    library_actions = list(range(6)) if full_action_space else ref.minimal_action_set()
    rng = np.random.default_rng(0)
    episodes = 0
    for _ in range(400):
        np.testing.assert_array_equal(out.obs, ref.state().astype(np.float32))
        assert out.obs.dtype == np.float32
        if out.is_last:
            out = env.step(DUMMY_ACTION, True)
            ref.reset()
            ref.last_action = 0  # the bridge starts every episode without a sticky action
            episodes += 1
            continue
        action = int(rng.integers(1, env.spec.num_actions))
        out = env.step(action, False)
        reward, terminal = ref.act(library_actions[action - 1])
        assert out.reward == np.float32(reward)
        assert bool(out.is_last) == terminal
        assert out.to_play == SINGLE_AGENT
    assert episodes >= 1  # the comparison crossed an episode boundary


def test_sticky_action_prob_option_reaches_minatar():
    assert minatar.make("breakout")._env.sticky_action_prob == 0.1
    assert minatar.make("breakout", sticky_action_prob=0.0)._env.sticky_action_prob == 0.0
    assert minatar.make("asterix")._env.env.ramping is True
    assert minatar.make("asterix", difficulty_ramping=False)._env.env.ramping is False


def test_seed_option_makes_reset_without_seed_reproducible():
    a = minatar.make("asterix", seed=3)
    b = minatar.make("asterix", seed=3)
    outs = []
    for env in (a, b):
        out = env.reset()
        obs = [out.obs]
        for t in range(60):
            out = env.step(1 + t % 5, bool(out.is_last))
            obs.append(out.obs)
        outs.append(np.stack(obs))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_freeway_ends_after_2501_steps():
    env = minatar.make("freeway", seed=0)
    out = env.reset()
    steps = 0
    while not out.is_last:
        out = env.step(1, False)  # noop: the chicken never scores, only the timer ends the episode
        steps += 1
    assert steps == 2501 == env.spec.max_episode_steps
    np.testing.assert_array_equal(out.legal_actions, [True, False, False, False])


def test_max_episode_steps_truncates_and_step_resets():
    env = minatar.make("freeway", max_episode_steps=7, seed=0)
    assert env.spec.max_episode_steps == 7
    out = env.reset()
    for t in range(7):
        assert not out.is_last
        out = env.step(2, False)
    assert out.is_last and not out.is_first
    np.testing.assert_array_equal(out.legal_actions, [True, False, False, False])
    # After the last step, only a reset (is_last=True, action ignored) continues.
    with pytest.raises(IllegalActionError, match=r"action 2 is illegal in minatar:freeway: the episode has ended"):
        env.step(2, False)
    out = env.step(3, True)
    assert out.is_first and not out.is_last and out.reward == 0.0
    np.testing.assert_array_equal(out.legal_actions, [False, True, True, True])
    # A longer option than the game's own limit leaves the game's limit in the spec.
    assert minatar.make("freeway", max_episode_steps=10_000).spec.max_episode_steps == 2501


def test_illegal_actions_name_the_action_and_the_legal_set():
    env = minatar.make("breakout", seed=0)
    env.reset()
    for action in (DUMMY_ACTION, 4, -1):
        with pytest.raises(IllegalActionError) as info:
            env.step(action, False)
        assert str(info.value) == f"action {action} is illegal in minatar:breakout; legal: [1, 2, 3]"


def test_unknown_option_and_game():
    with pytest.raises(MooziError) as info:
        minatar.make("breakout", sticky_actions=0.2)
    assert str(info.value) == (
        "unknown option(s) sticky_actions for minatar:breakout; allowed: seed, sticky_action_prob,"
        " full_action_space, max_episode_steps, difficulty_ramping"
    )
    with pytest.raises(UnknownGameError, match=r"did you mean minatar:breakout\?"):
        minatar.make("breakot")
    with pytest.raises(MooziError, match="sticky_action_prob must be in"):
        minatar.make("breakout", sticky_action_prob=1.5)
    with pytest.raises(MooziError, match="max_episode_steps must be at least 1"):
        minatar.make("breakout", max_episode_steps=0)


def test_outputs_are_independent_of_later_steps():
    """Kept outputs stay valid: obs are fresh arrays and the shared masks are read-only."""
    env = minatar.make("breakout", seed=0)
    first = env.reset()
    kept = first.obs.copy()
    out = env.step(1, False)
    env.step(3, bool(out.is_last))
    np.testing.assert_array_equal(first.obs, kept)
    with pytest.raises(ValueError):
        first.legal_actions[0] = True
