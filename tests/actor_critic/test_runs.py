"""agent=ppo and agent=impala through `moozi train`'s driver: the run directory, tests, checkpoints,
exact resume, `load_agent` and `moozi eval`, as MuZero runs have them."""

import json
import pathlib

import jax
import numpy as np
import pytest

from moozi.play import load_agent
from moozi.config import build_config
from moozi.errors import MooziError
from moozi.evaluation.matches import evaluate
from moozi.runs.metrics_log import read_metrics
from moozi.training.driver import Driver

SMALL = {"ppo.num_envs": 4, "ppo.rollout_steps": 8, "ppo.mlp_hidden_sizes": "16", "ppo.num_minibatches": 2,
         "ppo.num_epochs": 2, "impala.num_envs": 4, "impala.rollout_steps": 8, "impala.mlp_hidden_sizes": "16",
         "train.test_every_updates": 8, "train.test_episodes": 3, "train.test_max_steps": 50,
         "train.log_every_updates": 4}


def _run(game, run_dir, env_steps, resume=False, **overrides):
    config = build_config(game, overrides={**SMALL, "train.max_env_steps": env_steps, **overrides})
    driver = Driver(config, run_dir, resume=resume, progress=False)
    try:
        return driver.run()
    finally:
        driver.close()


def _leaves(run_dir):
    return jax.tree.leaves(load_agent(run_dir, checkpoint="latest").variables)


@pytest.mark.slow
def test_anakin_ppo_run_resumes_exactly(tmp_path):
    """Stopped after 2 iterations and resumed to 4, the parameters equal those of 4 iterations straight,
    bit for bit (learner, acting parameters, key and the envs' carry all come back)."""
    straight = _run("gymnax:CartPole-v1", tmp_path / "straight", 128, agent="ppo")
    _run("gymnax:CartPole-v1", tmp_path / "split", 64, agent="ppo")
    resumed = _run("gymnax:CartPole-v1", tmp_path / "split", 128, resume=True)  # the saved agent is kept
    assert straight["updates"] == resumed["updates"] == 16 and resumed["env_steps"] == 128
    for a, b in zip(_leaves(tmp_path / "straight"), _leaves(tmp_path / "split"), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    rows = [r for r in read_metrics(tmp_path / "split") if r.get("role") == "test"]
    assert [r["step"] for r in rows] == [8, 16] and all(np.isfinite(r["test_return"]) for r in rows)
    summary = json.loads((tmp_path / "split" / "summary.json").read_text())
    assert summary["agent"] == "ppo" and summary["last_test"]["update"] == 16
    agent = load_agent(tmp_path / "split")  # a gymnax game, played one episode at a time (JaxSingleEnv)
    result = evaluate(agent, agent.config.game, "random", 2, seed=0, max_steps=30)
    assert len(result.returns) == 2 and all(1 <= r <= 30 for r in result.returns)


@pytest.mark.slow
def test_host_impala_run_tests_checkpoints_and_evaluates(tmp_path):
    """The host loop (gymnasium CartPole over a VectorEnv): metrics, a best checkpoint, and a loaded agent
    that `moozi eval` plays with capped episodes."""
    summary = _run("cartpole", tmp_path / "run", 288, agent="impala")
    # Lag 1: each iteration updates on the previous iteration's rollout, so 9 rollouts make 8 updates.
    assert summary["updates"] == 8 and summary["env_steps"] == 288 and summary["policy_lag"] == 1.0
    train_rows = [r for r in read_metrics(tmp_path / "run") if r.get("role") != "test"]
    assert train_rows and all(np.isfinite(r["total_loss"]) for r in train_rows)
    assert summary["best_checkpoint"] is not None
    agent = load_agent(tmp_path / "run")
    result = evaluate(agent, agent.config.game, "random", 3, seed=0, max_steps=20)
    assert len(result.returns) == 3 and max(result.returns) <= 20


def test_actor_critics_refuse_what_they_cannot_run(tmp_path):
    with pytest.raises(MooziError, match="agent=ppo plays one-player games; tic_tac_toe has two players"):
        Driver(build_config("tic_tac_toe", overrides={"agent": "ppo"}), tmp_path / "a", progress=False)
    with pytest.raises(MooziError, match="runs the Anakin loop, one jitted program in one process"):
        Driver(build_config("gymnax:CartPole-v1", overrides={"agent": "impala", "backend.kind": "ray"}),
                          tmp_path / "b", progress=False)
    with pytest.raises(MooziError, match="ppo.num_envs=6 does not split evenly over train.num_training_workers=4"):
        _run("cartpole", tmp_path / "c", 64, agent="ppo", **{"ppo.num_envs": 6, "train.num_training_workers": 4})
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # refused before the run dir is made
    with pytest.raises(MooziError, match="ppo.policy_lag"):
        build_config("cartpole", overrides={"agent": "ppo", "ppo.policy_lag": 2})
    with pytest.raises(MooziError, match="unknown config key 'ppo.asynchronous'"):  # IMPALA's mode only
        build_config("cartpole", overrides={"agent": "ppo", "ppo.asynchronous": True})
    with pytest.raises(MooziError, match="impala.asynchronous=true needs a host game: gymnax:CartPole-v1 runs the Anakin"):
        Driver(build_config("gymnax:CartPole-v1", overrides={"agent": "impala", "impala.asynchronous": True}),
                          tmp_path / "d", progress=False)
    assert not (tmp_path / "d").exists()


ASYNCHRONOUS = {"agent": "impala", "impala.asynchronous": True, "train.num_training_workers": 2,
                "train.log_every_updates": 1}


@pytest.mark.slow
@pytest.mark.parametrize("threads", [False, True])
def test_host_impala_asynchronous_run_logs_its_lag_and_resumes(tmp_path, threads):
    """impala.asynchronous, two training rollout workers of 2 envs each: every update learns from one
    worker's rollout (2 x 8 env steps) and logs its policy lag; a checkpoint keeps both rollouts in
    flight, with their versions, and the resumed run learns from them first."""
    overrides = {**ASYNCHRONOUS, "backend.inline_threads": threads}
    first = _run("cartpole", tmp_path / "run", 96, **overrides)
    summary = _run("cartpole", tmp_path / "run", 192, resume=True, **overrides)
    assert first["updates"] == 6 and summary["updates"] == 12 and summary["env_steps"] == 192
    rows = [r for r in read_metrics(tmp_path / "run") if r.get("role") != "test"]
    assert [r["env_steps"] for r in rows] == [16.0 * k for k in range(1, 13)]
    lags = [r["policy_lag"] for r in rows]
    assert lags[0] == 0 and all(lag >= 0 and lag == int(lag) for lag in lags)  # all launched on version 0
    arrays = np.load(pathlib.Path(first["checkpoint"]) / "arrays.npz")
    assert sorted(int(arrays[f"queue{j}/worker"]) for j in range(2)) == [0, 1] and "queue2/worker" not in arrays
    assert arrays["queue0/action"].shape == (8, 2)  # [T, one worker's envs]
    if threads:
        # The version-0 rollout not learned from first is learned from later, by the checkpoint's queue if
        # not before.
        assert max(lags) >= 1
    else:
        # Every call finishes at once, so the workers take turns: after the first, each update learns
        # from the rollout launched before the previous update.
        assert lags == [0.0] + [1.0] * 11
        assert [int(arrays[f"queue{j}/version"]) for j in range(2)] == [5, 6]


@pytest.mark.slow
@pytest.mark.xdist_group("ray")  # one Ray instance at a time (pyproject.toml, addopts)
def test_host_impala_asynchronous_resumes_on_ray(tmp_path):
    """Six updates inline (unthreaded: its queue is known), then six as Ray actors: the resumed run
    learns from the checkpoint's two rollouts first (put in the object store), then from the actors'."""
    pytest.importorskip("ray")
    _run("cartpole", tmp_path / "run", 96, **ASYNCHRONOUS, **{"backend.inline_threads": False})
    summary = _run("cartpole", tmp_path / "run", 192, resume=True, **ASYNCHRONOUS, **{"backend.kind": "ray"})
    assert summary["updates"] == 12 and summary["env_steps"] == 192
    lags = [r["policy_lag"] for r in read_metrics(tmp_path / "run") if r.get("role") != "test"]
    assert lags[:8] == [0.0] + [1.0] * 7  # the checkpoint's queue: versions 5 and 6, learned at 6 and 7
    assert len(lags) == 12 and all(lag >= 0 and lag == int(lag) for lag in lags[8:])


@pytest.mark.slow
@pytest.mark.xdist_group("ray")  # one Ray instance at a time (pyproject.toml, addopts)
def test_ppo_on_ray_gives_the_metrics_of_inline(tmp_path):
    """Synchronous PPO (lag 1: the learner trains on version i-1's rollout while two rollout workers play
    version i) for its first 200 updates: the Ray backend's metrics equal the inline backend's."""
    pytest.importorskip("ray")
    deterministic = ("total_loss", "policy_loss", "value_loss", "approx_kl", "episode_return", "env_steps",
                     "episodes", "policy_version", "test_return")
    rows = {}
    for kind in ("inline", "ray"):
        overrides = {"agent": "ppo", "ppo.policy_lag": 1, "train.num_training_workers": 2, "backend.kind": kind,
                     "train.test_every_updates": 100, "train.log_every_updates": 20}
        summary = _run("cartpole", tmp_path / kind, 51 * 32, **overrides)  # 51 rollouts of 4 x 8: 200 updates
        assert summary["updates"] == 200
        rows[kind] = [{k: r[k] for k in ("step", "role", *deterministic) if k in r} for r in read_metrics(tmp_path / kind)]
    assert len(rows["inline"]) == len(rows["ray"]) >= 10
    assert sum(r.get("role") == "test" for r in rows["inline"]) == 2
    for a, b in zip(rows["inline"], rows["ray"], strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], str):
                assert a[key] == b[key]
            else:
                np.testing.assert_allclose(a[key], b[key], rtol=1e-6, err_msg=f"{key} at step {a['step']}")
