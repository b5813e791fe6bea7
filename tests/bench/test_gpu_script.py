"""bench/gpu.py end to end at its tiny size on this CPU: the JSON it writes and the runs it keeps."""

import json

import pytest

from bench import gpu
from moozi.play import load_agent
from moozi.evaluation.matches import evaluate


@pytest.mark.slow
def test_tiny_gpu_script_writes_its_rates_and_keeps_loadable_runs(tmp_path):
    out = tmp_path / "out"
    # Two of the four parts (bench/results/2026-11-27-gpu-script-cpu-tiny.json has all of them): the Anakin
    # PPO loop and a board game's run, the kinds of run directory the script brings back.
    result = gpu.main(["--out", str(out), "--tiny", "--only", "ppo,alphazero", "--ppo-env-steps", "64"])
    assert json.loads((out / "gpu.json").read_text()) == json.loads(json.dumps(result))  # tuples: lists
    assert result["benchmark"] == "gpu" and result["tiny"] and result["device"]["platform"] == "cpu"
    assert result["device"]["kind"] and result["matmul_gflops"] > 0 and "core" not in result
    assert set(result["runs"]) == {"ppo_breakout", "alphazero_connect_four"}
    ppo, alphazero = result["runs"]["ppo_breakout"], result["runs"]["alphazero_connect_four"]
    assert ppo["env_steps"] == 64 and ppo["stop_reason"] == "max_env_steps"
    # 192 env steps: Connect Four games end after ~4 iterations of 4 envs x 6 steps, then updates begin.
    assert alphazero["env_steps"] == 192 and alphazero["updates"] > 0
    for run in (ppo, alphazero):
        assert run["device"].startswith("cpu:0")
        assert run["env_steps_per_s"] > 0 and run["updates_per_s"] > 0 and run["compile_seconds"] > 0
        assert run["steady_env_steps_per_s"] > run["env_steps_per_s"]  # the first window pays for compiling
        assert (out / run["checkpoint"] / "meta.json").exists()
        assert json.loads((out / run["run_dir"] / "summary.json").read_text())["device"] == run["device"]
    board_agent = load_agent(out / alphazero["run_dir"], checkpoint="latest")
    assert board_agent.config.game == "pgx:connect_four" and board_agent.config.agent == "alphazero"
    match = evaluate(board_agent, board_agent.config.game, "random", 2, 0)  # what `moozi eval` plays
    assert match.games == match.wins + match.draws + match.losses == 2
    ppo_agent = load_agent(out / ppo["run_dir"])
    returns = evaluate(ppo_agent, ppo_agent.config.game, "random", 2, seed=0, max_steps=20).returns
    assert len(returns) == 2
