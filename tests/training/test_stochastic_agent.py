"""agent=stochastic_muzero wired into training (docs/stochastic.md): config, builders, replay, learner,
the Anakin segment, and a tiny run on pgx:2048 that checkpoints, resumes and loads."""

import dataclasses
import json

import jax
import numpy as np
import pytest
from tests.helpers.tiny import TINY, run_driver

from moozi.builders import (
    build_network,
    env_spec,
    example_stacked_obs,
    learns_chance_outcomes,
    make_act,
    make_loss,
    seed_key,
    symmetry_augment,
)
from moozi.config import ConfigError, build_config, config_from_dict, config_to_dict
from moozi.core.loss import loss_fn
from moozi.core.stochastic_loss import StochasticLossConfig, StochasticTrainingTarget, stochastic_loss_fn
from moozi.core.stochastic_network import StochasticNetwork
from moozi.core.train_step import OptimizerConfig, init_train_state, make_train_step
from moozi.core.types import Trajectory
from moozi.envs.base import DUMMY_ACTION
from moozi.envs.registry import make_env, resolve_game_name
from moozi.training.anakin_segment import init_carry, make_segment
from moozi.training.episodes import RolloutResult
from moozi.training.roles.parameter_optimizer import ParameterOptimizer
from moozi.training.roles.replay_buffer import ReplayRole

CHANCE_TERMS = ("afterstate_value_loss", "chance_loss", "commitment_loss", "code_perplexity")
C = 8  # a small codebook keeps the tiny network tiny


def _config(**extra):
    """The 2048 preset at test sizes: history 2 (so windows overlap), K = 2, C = 8."""
    overrides = {**TINY, "targets.history_length": "2", "stochastic.num_chance_outcomes": str(C),
                 **{k: str(v) for k, v in extra.items()}}
    return build_config("2048", overrides=overrides)


CONFIG = _config()


# ------------------------------------------------------------------------------------------- config


def test_the_2048_and_backgammon_presets_train_stochastic_muzero():
    for preset, game in (("2048", "pgx:2048"), ("backgammon", "pgx:backgammon")):
        config = build_config(preset)
        assert (config.agent, resolve_game_name(config.game)) == ("stochastic_muzero", game)
        assert config.planner.search_policy.value == "muzero"
        assert config.stochastic.num_chance_outcomes == 32
        assert learns_chance_outcomes(config)
    assert not learns_chance_outcomes(build_config("pgx:2048"))  # MuZero unless asked


def test_moozi_games_lists_the_chance_presets(capsys):
    from moozi.cli import main

    assert main(["games"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split() == ["2048", "->", "pgx:2048"] for line in lines)
    assert any(line.split() == ["backgammon", "->", "pgx:backgammon"] for line in lines)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"planner.search_policy": "gumbel_muzero"},
         "planner.search_policy='gumbel_muzero' is not allowed with agent=stochastic_muzero; allowed: 'muzero' "
         "(PUCT: mctx has no Gumbel policy with chance nodes)"),
        ({"targets.num_unroll_steps": 0}, "bad value 0 for targets.num_unroll_steps: expected a positive integer"),
        ({"stochastic.num_chance_outcomes": 1},
         "bad value 1 for stochastic.num_chance_outcomes: expected an integer >= 2 (one code cannot tell outcomes apart)"),
        ({"stochastic.commitment_coef": -0.5}, "bad value -0.5 for stochastic.commitment_coef: expected a number >= 0"),
        ({"agent": "stochastic"},
         "bad value 'stochastic' for agent: expected one of 'muzero', 'alphazero', 'stochastic_muzero', 'ppo', 'impala'"),
    ],
)
def test_invalid_combinations_name_the_key_and_the_allowed_values(overrides, message):
    with pytest.raises(ConfigError) as error:
        build_config("2048", overrides=overrides)
    assert message in str(error.value)


def test_a_preset_with_gumbel_search_is_refused_for_the_agent():
    with pytest.raises(ConfigError, match=r"planner.search_policy='gumbel_muzero' is not allowed with agent=stochastic_muzero"):
        build_config("tic_tac_toe", overrides={"agent": "stochastic_muzero"})
    config = build_config("tic_tac_toe", overrides={"agent": "stochastic_muzero", "planner.search_policy": "muzero"})
    assert config.agent == "stochastic_muzero"


def test_the_stochastic_section_round_trips_and_reaches_the_loss():
    config = _config(**{"stochastic.chance_coef": 0.5, "stochastic.afterstate_value_coef": 0.75,
                        "stochastic.afterstate_value_target": "next_value", "stochastic.consistency_steps": "all",
                        "stochastic.commitment_coef": 0.125, "loss.value_coef": 0.5, "train.agent_network": "target"})
    saved = json.loads(json.dumps(config_to_dict(config)))
    assert saved["stochastic"] == {"num_chance_outcomes": C, "afterstate_value_coef": 0.75,
                                   "afterstate_value_target": "next_value", "chance_coef": 0.5,
                                   "commitment_coef": 0.125, "consistency_steps": "all"}
    assert config_from_dict(saved) == config
    del saved["stochastic"]["afterstate_value_target"], saved["stochastic"]["consistency_steps"]  # saved before the keys
    assert config_from_dict(saved).stochastic.afterstate_value_target == "return"
    assert config_from_dict(saved).stochastic.consistency_steps == "first"
    loss, loss_config = make_loss(config)
    assert loss is stochastic_loss_fn
    assert loss_config == StochasticLossConfig(**dataclasses.asdict(config.loss), afterstate_value_coef=0.75,
                                               afterstate_value_target="next_value", chance_coef=0.5,
                                               commitment_coef=0.125, consistency_steps="all")
    with pytest.raises(ConfigError, match="stochastic.afterstate_value_target.*'return'.*'next_value'"):
        _config(**{"stochastic.afterstate_value_target": "td"})
    with pytest.raises(ConfigError, match="stochastic.consistency_steps.*'first'.*'all'"):
        _config(**{"stochastic.consistency_steps": "every"})
    muzero = build_config("pgx:2048")
    assert make_loss(muzero) == (loss_fn, muzero.loss)


def test_the_agent_can_be_augmented_where_the_game_has_symmetries():
    """Its batches carry future observations; the augment moves them with their element
    (tests/core/test_symmetry.py, tests/core/test_replay.py). The 2048 preset turns it off (it halved
    the short regression's score, docs/stochastic.md); asked for, it is there."""
    preset = build_config("2048")
    assert preset.agent == "stochastic_muzero" and not preset.replay.symmetry_augmentation
    assert symmetry_augment(preset, env_spec(preset)) is None
    on = build_config("2048", overrides={"replay.symmetry_augmentation": True})
    assert symmetry_augment(on, env_spec(on)) is not None
    backgammon = build_config("backgammon")  # no board symmetry: a race in one direction
    assert symmetry_augment(backgammon, env_spec(backgammon)) is None


# ------------------------------------------------------------------------------------------- pieces


def _params(config, seed=0):
    spec = env_spec(config)
    state = init_train_state(build_network(config, spec), config.optimizer, seed_key(seed, 0),
                             example_stacked_obs(config, spec))
    return jax.device_get({"params": state.params, "batch_stats": state.batch_stats})


def _episode(spec, length, seed):
    """A 2048-shaped episode of random binary boards and legal moves (the replay only reads its arrays)."""
    rng = np.random.default_rng(seed)
    A = spec.num_actions
    action = rng.integers(1, A, length).astype(np.int32)
    action[-1] = DUMMY_ACTION
    legal = np.ones((length, A), bool)
    legal[:-1, DUMMY_ACTION] = False  # the dummy is legal on the last step only, and alone there
    legal[-1] = np.arange(A) == DUMMY_ACTION
    return Trajectory(
        obs=(rng.random((length, *spec.obs_shape)) < 0.2).astype(np.float32),
        action=action,
        reward=np.where(np.arange(length) == 0, 0, rng.choice([0, 4, 8, 16], length)).astype(np.float32),
        is_first=np.arange(length) == 0,
        is_last=np.arange(length) == length - 1,
        legal_actions=legal,
        to_play=np.full(length, -1, np.int32),
        root_value=rng.uniform(0, 50, length).astype(np.float32),
        action_probs=legal / legal.sum(-1, keepdims=True, dtype=np.float32),
    )


@pytest.fixture(scope="module")
def replay_role():
    """The replay role of the agent, holding 3 episodes."""
    role = ReplayRole(CONFIG)
    spec = env_spec(CONFIG)
    role.add_rollouts([RolloutResult([_episode(spec, n, seed) for seed, n in enumerate((30, 41, 25))], {}, 0, 96)])
    return role


@pytest.fixture(scope="module")
def replay_batch(replay_role):
    """A batch of 16 targets from the replay role."""
    ((batch, indices),) = replay_role.sample_batches(1, 16)
    return batch, indices


def test_the_replay_role_hands_out_future_stacked_observations(replay_batch):
    batch, indices = replay_batch
    spec = env_spec(CONFIG)
    L, K = CONFIG.targets.history_length, CONFIG.targets.num_unroll_steps
    assert isinstance(batch, StochasticTrainingTarget)
    assert batch.future_stacked_obs.shape == (16, K, 4, 4, L * (spec.obs_shape[-1] + spec.num_actions)) == (16, 2, 4, 4, 72)
    assert batch.target.stacked_obs.shape == (16, 4, 4, 72)
    np.testing.assert_array_equal(batch.future_stacked_obs[:, 0], batch.target.next_stacked_obs)
    assert indices.shape == (16,)
    # One player: the one-step afterstate target's weight is gamma wherever o_{t+k+1} is not terminal, else 0.
    assert batch.next_value_discount.shape == (16, K)
    assert set(np.unique(batch.next_value_discount)) <= {0.0, np.float32(CONFIG.targets.discount)}


@pytest.mark.slow
def test_the_network_is_stochastic_and_the_act_plays_legal_moves():
    spec = env_spec(CONFIG)
    network = build_network(CONFIG, spec)
    assert isinstance(network, StochasticNetwork) and network.num_chance_outcomes == C
    # The Anakin path: the stochastic act inside the compiled self-play segment on pgx's 2048.
    env = make_env(CONFIG.game)
    segment = make_segment(env, make_act(CONFIG, spec, CONFIG.planner))
    carry = jax.jit(init_carry, static_argnums=(0, 1, 2))(env, 4, CONFIG.targets.history_length, jax.random.PRNGKey(0))
    _, records = segment(_params(CONFIG), carry, jax.random.PRNGKey(1), np.float32(0.0), num_steps=3)
    records = jax.device_get(records)
    assert records.action.shape == (3, 4)
    legal = records.legal_actions
    assert np.all(np.take_along_axis(legal, records.action[..., None], -1))  # every move legal
    np.testing.assert_allclose(records.action_probs.sum(-1), 1.0, rtol=1e-5)
    assert np.all(records.action_probs[~legal] == 0)
    assert np.all(np.isfinite(records.root_value))
    # A step of the search is a move and its chance outcome: 4 simulations reach at least 1 step deep.
    assert np.all(records.stats.max_depth >= 1) and np.all(records.stats.max_depth <= 4)


@pytest.mark.slow
def test_a_train_step_with_the_stochastic_loss_lowers_it_on_a_fixed_batch(replay_batch):
    batch, _ = replay_batch
    spec = env_spec(CONFIG)
    network = build_network(CONFIG, spec)
    loss, loss_config = make_loss(CONFIG)
    optimizer = OptimizerConfig(learning_rate=3e-3, warmup_steps=0)
    train_step = make_train_step(network, loss_config, optimizer, loss=loss)
    state = init_train_state(network, optimizer, jax.random.PRNGKey(0), example_stacked_obs(CONFIG, spec))
    history = []
    for i in range(30):
        state, metrics, priorities = train_step(state, batch, jax.random.PRNGKey(i))
        history.append(jax.device_get(metrics))
    first, last = history[0], history[-1]
    for name in (*CHANCE_TERMS, "total_loss", "policy_loss", "value_loss", "reward_loss"):
        assert np.isfinite(first[name]) and np.isfinite(last[name]), name
    assert first["chance_loss"] > 0 and first["commitment_loss"] > 0 and first["afterstate_value_loss"] > 0
    assert 1.0 <= first["code_perplexity"] <= C + 1e-4
    assert last["total_loss"] < 0.8 * first["total_loss"], (first["total_loss"], last["total_loss"])
    assert priorities.shape == (16,) and np.all(np.isfinite(priorities))
    assert int(state.step) == 30


@pytest.mark.slow
def test_the_parameter_optimizer_trains_with_the_kinds_loss(replay_batch):
    optimizer = ParameterOptimizer(CONFIG)
    result = optimizer.update([replay_batch, replay_batch])
    assert result.version == 2
    for name in CHANCE_TERMS:
        assert name in result.metrics and np.isfinite(result.metrics[name]), name
    assert result.metrics["chance_loss"] > 0


@pytest.mark.slow
def test_the_reanalyze_worker_re_searches_with_the_stochastic_planner(replay_role):
    from moozi.training.roles.reanalyze_worker import ReanalyzeRolloutWorker

    stored = replay_role.sample_trajectories(2)
    out = ReanalyzeRolloutWorker(CONFIG).run(_params(CONFIG), stored)
    assert sorted(i for i, _, _ in out) == sorted(i for i, _ in stored)
    by_id = dict(stored)
    for trajectory_id, root_value, action_probs in out:
        length = len(by_id[trajectory_id].action)
        assert root_value.shape == (length,) and action_probs.shape == (length, 5)
        assert np.all(np.isfinite(root_value))
        np.testing.assert_allclose(action_probs.sum(-1), 1.0, rtol=1e-5)
        assert np.all(action_probs[~by_id[trajectory_id].legal_actions] == 0)
        # The last step has only the dummy legal: the search puts all its visits there.
        np.testing.assert_array_equal(action_probs[-1], [1, 0, 0, 0, 0])
    assert replay_role.replace_search_statistics(out) == sum(len(by_id[i].action) for i in by_id)


# ------------------------------------------------------------------------------------------- a run


@pytest.mark.slow
def test_a_tiny_2048_run_checkpoints_resumes_and_loads(tmp_path):
    from moozi.play.trained_agent import load_agent
    from moozi.runs.metrics_log import read_metrics

    # 2048 episodes of a random-ish player last ~100-150 moves; the buffer gets only finished episodes.
    config = _config(**{"env.num_envs": 4, "train.rollout_steps": 25, "train.test_every_updates": 4,
                        "train.test_max_steps": 30, "train.test_episodes": 2, "replay.min_fill": 50})
    run_dir = tmp_path / "run"
    first = run_driver(dataclasses.replace(config, train=dataclasses.replace(config.train, max_env_steps=700)), run_dir)
    assert first["env_steps"] == 700 and first["updates"] > 0
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.name.startswith("ckpt-"))
    assert checkpoints
    rows = [row for row in read_metrics(run_dir) if "chance_loss" in row]
    assert rows and all(np.isfinite(row[name]) for row in rows for name in CHANCE_TERMS)

    resumed = run_driver(dataclasses.replace(config, train=dataclasses.replace(config.train, max_env_steps=900)),
                         run_dir, resume=True)
    assert resumed["env_steps"] == 900 and resumed["updates"] > first["updates"]

    agent = load_agent(run_dir, checkpoint="latest")
    assert agent.config.agent == "stochastic_muzero" and agent.checkpoint.name == f"ckpt-{resumed['updates']:010d}"
    outcome = agent.run_episode(seed=0, max_steps=10)
    assert outcome.steps == 10 and outcome.cut and outcome.episode_return >= 0
    assert agent.last_search.action_probs.shape == (5,)

    # `moozi eval`'s one-player path reports each game's largest tile (2048 only).
    from moozi.evaluation.matches import evaluate
    from moozi.evaluation.tiles import largest_tile

    result = evaluate(agent, "2048", "random", num_games=2, seed=0, max_steps=20)
    assert result.game == "pgx:2048" and result.cut_episodes == 2
    assert len(result.largest_tiles) == 2 and all(t in (4, 8, 16, 32, 64) for t in result.largest_tiles)
    assert agent.run_episode(seed=0, max_steps=20).last_obs.shape == (4, 4, 31)
    assert largest_tile(agent.run_episode(seed=1, max_steps=20).last_obs) == result.largest_tiles[1]
    assert "largest tile reached: at least 256 0%" in result.format_table()
