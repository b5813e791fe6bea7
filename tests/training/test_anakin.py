"""The Anakin path: the jitted self-play segment against a host loop, its worker, resume, and the driver."""

import io

import jax
import numpy as np
import pyspiel
import pytest
from tests.helpers.tiny import TINY, run_driver

from moozi.config import build_config, preset_overrides
from moozi.core.acting import make_muzero_act
from moozi.core.train_step import init_train_state
from moozi.core.types import Trajectory
from moozi.envs.registry import make_env
from moozi.errors import MooziError
from moozi.runs.metrics_log import read_metrics
from moozi.training.anakin_segment import init_carry, make_segment
from moozi.training.roles.anakin_self_play import AnakinRolloutWorker
from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key
from moozi.training.search_loop import training_worker_class
from moozi.training.roles.self_play import TrainingRolloutWorker


def _config(game, preset, **extra):
    overrides = {**preset_overrides(preset), **TINY, "network.kind": "mlp", **{k: str(v) for k, v in extra.items()}}
    return build_config(game, overrides=overrides)


TTT = _config("pgx:tic_tac_toe", "tic_tac_toe")
BREAKOUT = _config("gymnax:Breakout-MinAtar", "breakout")  # history_length 2, PUCT search


def _params(config, seed=0):
    spec = env_spec(config)
    state = init_train_state(
        build_network(config, spec), config.optimizer, seed_key(seed, 0), example_stacked_obs(config, spec)
    )
    return jax.device_get({"params": state.params, "batch_stats": state.batch_stats})


def _host_loop(config, params, carry, rng, num_steps):
    """The segment's steps driven one by one from Python: jitted act, then a jitted vmapped env step."""
    spec = env_spec(config)
    env = make_env(config.game)
    act = jax.jit(make_muzero_act(build_network(config, spec), config.planner, spec, config.targets.history_length))
    env_step = jax.jit(jax.vmap(env.step))
    env_state, step, history, last_action = carry
    rows = []
    for key in jax.random.split(rng, num_steps):
        act_key, env_key, _ = jax.random.split(key, 3)  # the third key explores; epsilon is 0 here
        history, out = act(params, history, step, last_action, None, act_key)
        rows.append({**step._asdict(), "action": out.action, "root_value": out.root_value, "action_probs": out.action_probs})
        env_keys = jax.random.split(env_key, config.env.num_envs)
        env_state, step = env_step(env_state, out.action, step.is_last, env_keys)
        last_action = out.action
    return {k: np.stack([np.asarray(r[k]) for r in rows]) for k in rows[0]}


@pytest.mark.parametrize("config", [TTT, BREAKOUT], ids=["pgx_tic_tac_toe", "gymnax_breakout"])
@pytest.mark.slow
def test_segment_equals_host_loop(config):
    spec, num_envs, num_steps = env_spec(config), config.env.num_envs, 12
    env = make_env(config.game)
    act_fn = make_muzero_act(build_network(config, spec), config.planner, spec, config.targets.history_length)
    carry = init_carry(env, num_envs, config.targets.history_length, jax.random.key(3))
    params, rng = _params(config), jax.random.key(4)

    _, records = make_segment(env, act_fn)(params, carry, rng, 0.0, num_steps=num_steps)
    reference = _host_loop(config, params, carry, rng, num_steps)

    records = jax.device_get(records)
    assert records.action.shape == (num_steps, num_envs)
    assert records.is_last.any() and records.is_first[1:].any()  # episodes ended and restarted inside
    for field in ("obs", "is_first", "is_last", "reward", "legal_actions", "to_play", "action"):
        np.testing.assert_array_equal(getattr(records, field), reference[field], err_msg=field)
    for field in ("root_value", "action_probs"):
        np.testing.assert_allclose(getattr(records, field), reference[field], rtol=1e-5, atol=1e-6, err_msg=field)


def _openspiel_replay(trajectory: Trajectory):
    """Replays a pgx tic-tac-toe trajectory in OpenSpiel: every step's legal set, the end and the winner."""
    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    for t, action in enumerate(trajectory.action[:-1]):
        legal = np.zeros(10, bool)
        legal[np.asarray(state.legal_actions()) + 1] = True
        np.testing.assert_array_equal(trajectory.legal_actions[t], legal)
        mover = state.current_player()
        state.apply_action(int(action) - 1)
        if t + 1 < len(trajectory.action) - 1:
            assert not state.is_terminal() and trajectory.reward[t + 1] == 0
    assert state.is_terminal()
    return state.returns()[mover]  # the reward of the player who made the last move


@pytest.mark.slow
def test_anakin_worker_yields_exact_tic_tac_toe_games():
    worker = AnakinRolloutWorker(TTT, 0)
    result = worker.run(_params(TTT), 24, policy_version=3)
    assert result.policy_version == 3 and result.env_steps == 24 * 4
    assert len(result.trajectories) == result.metrics["episodes"] >= 4
    for t in result.trajectories:
        length = len(t.action)
        assert 6 <= length <= 10  # 5..9 moves, then the last step
        assert t.is_first[0] and not t.is_first[1:].any()
        assert t.is_last[-1] and not t.is_last[:-1].any()
        assert t.action[-1] == 0 and (t.action[:-1] >= 1).all()
        assert t.legal_actions[np.arange(length), t.action].all()
        assert (t.to_play[1:-1] != t.to_play[:-2]).all()  # players alternate
        np.testing.assert_allclose(t.action_probs.sum(-1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(t.action_probs[-1], np.eye(10)[0])
        # Only the last step is rewarded, with the outcome OpenSpiel gives the same moves.
        assert t.reward[:-1].sum() == 0 and t.reward[-1] == _openspiel_replay(t)
    assert result.metrics["episode_length"] == pytest.approx(np.mean([len(t.action) for t in result.trajectories]))
    assert "episode_return" not in result.metrics  # two-player: returns are in the test worker's win rates
    assert result.metrics["act_seconds"] > 0 and result.metrics["search_max_depth"] >= 1


@pytest.mark.slow
def test_anakin_worker_resumes_the_same_stream():
    params = _params(BREAKOUT)
    a = AnakinRolloutWorker(BREAKOUT, 0)
    a.run(params, 30, 0)
    buffer = io.BytesIO()
    np.savez(buffer, **a.state_dict())  # the checkpoint's format: no pickle
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as saved:
        state = dict(saved)
    b = AnakinRolloutWorker(BREAKOUT, 0)
    b.load_state_dict(state)
    ra, rb = a.run(params, 30, 1), b.run(params, 30, 1)
    assert len(ra.trajectories) == len(rb.trajectories) > 0
    for x, y in zip(ra.trajectories, rb.trajectories):
        for field in Trajectory._fields:
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field), err_msg=field)
    for key in ("env_steps", "episodes", "episode_length", "episode_return", "search_max_depth"):
        assert ra.metrics[key] == rb.metrics[key], key
    assert ra.metrics["episode_return"] == pytest.approx(np.mean([t.reward.sum() for t in ra.trajectories]))


@pytest.mark.slow
def test_workers_with_other_indices_play_other_games():
    params = _params(TTT)
    r0, r1 = AnakinRolloutWorker(TTT, 0).run(params, 24, 0), AnakinRolloutWorker(TTT, 1).run(params, 24, 0)
    a0, a1 = (np.concatenate([t.action for t in r.trajectories]) for r in (r0, r1))
    assert a0.shape != a1.shape or not np.array_equal(a0, a1)


@pytest.mark.slow
def test_act_fn_is_pluggable_sees_the_env_state_and_compiles_once():
    # An epsilon schedule changes epsilon on every run: a traced scalar, not a new program.
    config = _config("pgx:tic_tac_toe", "tic_tac_toe", **{"train.epsilon_start": 0.5, "train.epsilon_env_steps": 100})
    spec = env_spec(config)
    inner = make_muzero_act(build_network(config, spec), config.planner, spec, config.targets.history_length)
    seen = []

    def act_fn(params, history, step, last_action, env_state, rng):
        seen.append(env_state)  # runs only while tracing
        return inner(params, history, step, last_action, env_state, rng)

    worker = AnakinRolloutWorker(config, 0, act_fn=act_fn)
    for seed in range(3):  # new parameter values of the same shapes: no new trace
        worker.run(_params(config, seed), config.train.rollout_steps, seed)
    assert len(seen) == 1
    assert type(seen[0]).__module__.startswith("pgx")  # the batched pgx State itself
    assert seen[0].legal_action_mask.shape == (TTT.env.num_envs, 9)


@pytest.mark.slow
def test_epsilon_one_plays_random_legal_moves_whatever_the_network():
    always = _config("pgx:tic_tac_toe", "tic_tac_toe", **{"train.epsilon_start": 1.0, "train.epsilon_end": 1.0})
    games = {}
    for config in (always, TTT):
        for seed in (0, 1):
            result = AnakinRolloutWorker(config, 0).run(_params(config, seed), 24, 0)
            games[config is always, seed] = np.concatenate([t.action for t in result.trajectories])
            for t in result.trajectories:  # legal moves; p* is still the search's
                assert t.legal_actions[np.arange(len(t.action)), t.action].all()
                np.testing.assert_allclose(t.action_probs.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(games[True, 0], games[True, 1])  # the network chose no move
    assert not np.array_equal(games[False, 0], games[False, 1])  # at epsilon 0 it chose all of them


def test_resignation_is_refused_on_the_anakin_path():
    with pytest.raises(MooziError, match="train.resign works on the host path only"):
        AnakinRolloutWorker(_config("pgx:tic_tac_toe", "tic_tac_toe", **{"train.resign": "true"}), 0)


def test_load_state_dict_rejects_another_batch():
    state = AnakinRolloutWorker(TTT, 0).state_dict()
    other = AnakinRolloutWorker(_config("pgx:tic_tac_toe", "tic_tac_toe", **{"env.num_envs": 3}), 0)
    with pytest.raises(MooziError, match="env.num_envs=3"):
        other.load_state_dict(state)


def test_the_driver_picks_the_anakin_worker_for_jax_native_games():
    assert training_worker_class(TTT) is AnakinRolloutWorker
    assert training_worker_class(BREAKOUT) is AnakinRolloutWorker
    assert training_worker_class(_config("tic_tac_toe", "tic_tac_toe")) is TrainingRolloutWorker
    assert training_worker_class(_config("minatar:breakout", "breakout")) is TrainingRolloutWorker


@pytest.mark.slow
def test_inline_driver_trains_pgx_tic_tac_toe_with_the_anakin_worker(tmp_path):
    steps_per_iteration = TTT.env.num_envs * TTT.train.rollout_steps
    config = _config("pgx:tic_tac_toe", "tic_tac_toe", **{"train.max_env_steps": 12 * steps_per_iteration})
    summary = run_driver(config, tmp_path / "run")
    assert summary["env_steps"] == 12 * steps_per_iteration and summary["updates"] >= 8
    rows = read_metrics(tmp_path / "run")
    assert any("total_loss" in row for row in rows) and any("test_win_rate" in row for row in rows)
    assert any(row.get("record_seconds") is not None for row in rows)  # logged by the Anakin worker only


def _searched_in_full(trajectories):
    """[steps] whether each non-last step kept a policy target (p* sums to 1, not 0)."""
    sums = np.concatenate([t.action_probs[:-1].sum(-1) for t in trajectories])
    assert np.all(np.isclose(sums, 1.0, atol=1e-5) | (sums == 0.0))
    return sums > 0.5


@pytest.mark.slow
@pytest.mark.parametrize("worker", ["anakin", "host"])
def test_playout_cap_randomisation_keeps_policy_targets_of_full_searches_only(worker):
    """`planner.full_search_share`: about that share of steps keeps p*; the others store zeros, and
    their moves are still the fast search's legal choices."""
    game = "pgx:tic_tac_toe" if worker == "anakin" else "tic_tac_toe"
    config = _config(game, "tic_tac_toe", **{"planner.full_search_share": 0.3, "planner.fast_simulations": 2})
    cls = AnakinRolloutWorker if worker == "anakin" else TrainingRolloutWorker
    runner = cls(config, 0)
    trajectories = []
    for _ in range(6):
        trajectories.extend(runner.run(_params(config), 16, 0).trajectories)
    full = _searched_in_full(trajectories)
    assert 0.1 < full.mean() < 0.55  # one coin per step of the whole batch: a loose band
    for t in trajectories:
        assert t.legal_actions[np.arange(len(t.action)), t.action].all()
    # Off (the default): every step keeps its target.
    plain = cls(_config(game, "tic_tac_toe"), 0).run(_params(config), 16, 0).trajectories
    assert _searched_in_full(plain).all()


def test_playout_cap_settings_are_checked():
    from moozi.core.planner import fast_planner_config

    with pytest.raises(MooziError, match="full_search_share"):
        _config("pgx:tic_tac_toe", "tic_tac_toe", **{"planner.full_search_share": 0.0})
    with pytest.raises(MooziError, match="fast_simulations"):
        _config("pgx:tic_tac_toe", "tic_tac_toe", **{"planner.full_search_share": 0.5, "planner.fast_simulations": 0})
    # The fast search never has more simulations than the full one (TINY's 4); off at a share of 1.
    capped = _config("pgx:tic_tac_toe", "tic_tac_toe", **{"planner.full_search_share": 0.5, "planner.fast_simulations": 99})
    assert fast_planner_config(capped.planner).num_simulations == 4
    assert fast_planner_config(TTT.planner) is None
