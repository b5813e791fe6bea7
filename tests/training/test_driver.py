"""The driver end to end, inline: run directory, checkpoints, exact resume, and the CLI surface."""

import dataclasses
import json
import subprocess
import sys
import threading

import jax
import numpy as np
import pytest
from tests.helpers.cli import run_cli
from tests.helpers.tiny import STEPS_PER_ITERATION, TINY, deterministic_rows, run_driver, tiny_config

from moozi.play import load_agent
from moozi.builders import env_spec
from moozi.core.replay import replay_bytes
from moozi.runs.checkpoint import best_checkpoint, latest_checkpoint
from moozi.errors import MooziError
from moozi.runs.metrics_log import read_metrics
from moozi.training.backends import InlineBackend, WaitInterrupted
from moozi.training.best_checkpoint import next_best, strength_score
from moozi.training.driver import Driver


def _config(max_env_steps, **extra):
    return tiny_config(**{"train.max_env_steps": max_env_steps}, **extra)


def _checkpointed_env_steps(run_dir):
    return sorted(json.loads((p / "meta.json").read_text())["counters"]["env_steps"]
                  for p in (run_dir / "checkpoints").glob("ckpt-*"))


@pytest.mark.slow
def test_checkpoints_at_env_step_marks_once_each_and_not_again_on_resume(tmp_path):
    # Each mark: a checkpoint at the end of the iteration that reaches it (24 env steps an
    # iteration), besides the final one; a resumed run does not repeat a mark it passed.
    extra = {"train.checkpoint_every_minutes": 1000, "train.keep_checkpoints": 10}
    run_driver(_config(5 * STEPS_PER_ITERATION, **extra, **{"train.checkpoint_at_env_steps": "50,100"}), tmp_path / "run")
    assert _checkpointed_env_steps(tmp_path / "run") == [72, 120]
    run_driver(_config(7 * STEPS_PER_ITERATION, **extra, **{"train.checkpoint_at_env_steps": "50,100,130"}),
               tmp_path / "run", resume=True)
    assert _checkpointed_env_steps(tmp_path / "run") == [72, 120, 144, 168]


@pytest.mark.slow
def test_a_resumed_run_times_its_schedule_from_the_run_s_start(tmp_path, monkeypatch):
    # The driver hands the schedule the training seconds before the resume (a decay_over=run
    # schedule timed by minutes continues where it stopped; run_progress's test has the maths).
    from moozi.training import driver as driver_module

    seen, real = [], driver_module.run_progress

    def spy(train, counters, started, elapsed_before=0.0):
        seen.append(elapsed_before)
        return real(train, counters, started, elapsed_before)

    monkeypatch.setattr(driver_module, "run_progress", spy)
    run_driver(_config(2 * STEPS_PER_ITERATION), tmp_path / "run")
    assert seen and set(seen) == {0.0}
    meta = json.loads((latest_checkpoint(tmp_path / "run") / "meta.json").read_text())
    seen.clear()
    run_driver(_config(4 * STEPS_PER_ITERATION), tmp_path / "run", resume=True)
    assert seen and set(seen) == {meta["counters"]["elapsed_seconds"]} and seen[0] > 0


@pytest.mark.slow
def test_inline_run_writes_run_directory_and_resumes_exactly(tmp_path):
    total = 20 * STEPS_PER_ITERATION
    whole = run_driver(_config(total), tmp_path / "whole")
    assert whole["env_steps"] == total and whole["updates"] > 8
    assert (tmp_path / "whole" / "config.json").exists()
    assert list((tmp_path / "whole" / "checkpoints").glob("ckpt-*"))
    assert any("test_win_rate" in row for row in read_metrics(tmp_path / "whole"))

    run_driver(_config(total // 2), tmp_path / "split")
    resumed = run_driver(_config(total), tmp_path / "split", resume=True)
    assert resumed["env_steps"] == total and resumed["updates"] == whole["updates"]
    a, b = deterministic_rows(tmp_path / "whole"), deterministic_rows(tmp_path / "split")
    assert len(a) == len(b) > 4
    for row_a, row_b in zip(a, b):
        assert row_a.keys() == row_b.keys()
        assert row_a.get("role") == row_b.get("role")
        for key in row_a.keys() - {"role"}:
            np.testing.assert_allclose(row_a[key], row_b[key], rtol=1e-6, err_msg=f"{key} at step {row_a['step']}")

    # The best checkpoint is one the run tested, with that test's score, and the same whether or
    # not the run was resumed in between.
    tests = {row["step"]: row for row in read_metrics(tmp_path / "whole") if row.get("role") == "test"}
    metas = [json.loads((best_checkpoint(tmp_path / run) / "meta.json").read_text()) for run in ("whole", "split")]
    assert metas[0]["best"] == metas[1]["best"]
    best = metas[0]["best"]
    row = tests[best["update"]]
    assert best["name"] == "test_score" and best["score"] == row["test_win_rate"] + 0.5 * row["test_draw_rate"]
    assert best_checkpoint(tmp_path / "whole").name == f"best-{best['update']:010d}"
    assert load_agent(tmp_path / "whole").checkpoint == best_checkpoint(tmp_path / "whole")
    assert load_agent(tmp_path / "whole", checkpoint="latest").checkpoint == latest_checkpoint(tmp_path / "whole")


def test_best_is_the_newest_test_not_measurably_worse_than_the_peak():
    record = None
    kept = []
    # (score, standard error) per test: 0.6 is the peak; 0.5 is within noise of it (kept, newer);
    # 0.3 is measurably worse (the 0.5 stays); 0.62 is a new peak.
    for update, (score, se) in enumerate([(0.4, 0.05), (0.6, 0.05), (0.5, 0.05), (0.3, 0.05), (0.62, 0.05)]):
        new = next_best(record, "test_score", score, se, update)
        if new is not None:
            record = new
            kept.append(update)
    assert kept == [0, 1, 2, 4]
    assert record["peak"] == {"score": 0.62, "se": 0.05, "update": 4}
    # A slow decline is measured against the peak, not against the last best.
    record = None
    for update, score in enumerate([0.8, 0.75, 0.7, 0.65, 0.6]):
        record = next_best(record, "test_score", score, 0.02, update) or record
    assert record["update"] == 1 and record["peak"]["score"] == 0.8
    # Perfect scores have no spread: a tie goes to the newer.
    assert next_best({"name": "test_score", "peak": {"score": 1.0, "se": 0.0}}, "test_score", 1.0, 0.0, 9)["update"] == 9


def test_strength_score_prefers_the_solver_positions_and_reads_the_error_from_the_interval():
    metrics = {"test_win_rate": 0.9, "test_draw_rate": 0.1, "test_win_rate_ci_low": 0.8, "test_win_rate_ci_high": 0.96}
    name, score, se = strength_score(metrics, episodes=20)
    assert name == "test_score" and score == pytest.approx(0.95) and se == pytest.approx(0.08 / 1.959963984540054)
    metrics.update(test_solver_keeps_result=0.7, test_solver_keeps_result_ci_low=0.65, test_solver_keeps_result_ci_high=0.75)
    name, score, se = strength_score(metrics, episodes=20)
    assert (name, score) == ("test_solver_keeps_result", 0.7) and se == pytest.approx(0.05 / 1.959963984540054)
    assert strength_score({"test_return": 3.0, "test_return_std": 2.0}, episodes=16) == ("test_return", 3.0, 0.5)


@pytest.mark.slow
def test_load_agent_asked_for_a_best_checkpoint_the_run_does_not_have(tmp_path):
    run_driver(_config(6 * STEPS_PER_ITERATION, **{"train.keep_best": False}), tmp_path / "run")
    assert best_checkpoint(tmp_path / "run") is None
    assert load_agent(tmp_path / "run").checkpoint == latest_checkpoint(tmp_path / "run")  # falls back
    with pytest.raises(MooziError, match="no best checkpoint"):
        load_agent(tmp_path / "run", checkpoint="best")


@pytest.mark.slow
def test_inline_roles_on_their_own_threads_give_the_same_metrics_as_in_one_thread(tmp_path):
    rows = {}
    for threads in (False, True):
        summary = run_driver(_config(16 * STEPS_PER_ITERATION, **{"backend.inline_threads": threads}), tmp_path / str(threads))
        assert summary["updates"] > 8
        rows[threads] = deterministic_rows(tmp_path / str(threads))
    assert len(rows[True]) > 4
    assert rows[True] == rows[False]


class _Role:
    def __init__(self):
        self.calls = []

    def record(self, value):
        self.calls.append((value, threading.current_thread().name))
        return value

    def fail(self):
        raise ValueError("boom")

    def wait_for(self, event):
        assert event.wait(30)
        return "slow"


def test_threaded_inline_calls_run_in_order_on_the_roles_thread_and_errors_surface_at_get():
    backend = InlineBackend(threaded=True)
    a, b = backend.start("a", _Role), backend.start("b", _Role)
    first = a.call(_Role.record, 1)
    relayed = b.call(_Role.record, backend.resolve_arg(first))  # a future handed from one role to another
    failed = a.call(_Role.fail)
    last = a.call(_Role.record, 2)
    assert backend.get([relayed, last]) == [1, 2]
    with pytest.raises(ValueError, match="boom"):
        backend.get(failed)
    assert [value for value, _ in a.obj.calls] == [1, 2]
    assert {name.split("_")[0] for _, name in a.obj.calls} == {"moozi-a"}
    assert b.obj.calls[0][1].startswith("moozi-b")
    for handle in (a, b):
        handle.drain()
    unthreaded = InlineBackend(threaded=False).start("c", _Role)
    assert unthreaded.obj.calls == [] and InlineBackend(threaded=False).get(unthreaded.call(_Role.record, 3)) == 3
    assert unthreaded.obj.calls == [(3, threading.current_thread().name)]
    with pytest.raises(TypeError, match=r"handle.call\(ReplayRole.ready\), not its name 'record'"):
        unthreaded.call("record", 4)  # a role's method, not its name: a reader can follow the call


def test_get_first_takes_the_first_call_to_finish_and_gives_up_on_a_stop_request():
    backend = InlineBackend(threaded=True)
    slow_role, fast_role = backend.start("slow", _Role), backend.start("fast", _Role)
    release = threading.Event()
    slow, fast = slow_role.call(_Role.wait_for, release), fast_role.call(_Role.record, 7)
    assert backend.get_first([slow, fast]) == (1, 7)
    backend.interrupt = lambda: "a signal"
    with pytest.raises(WaitInterrupted, match=r"stopped \(a signal\) while waiting for slow.wait_for"):
        backend.get_first([slow])
    backend.interrupt = None
    release.set()
    assert backend.get(slow) == "slow"
    assert backend.get_first([slow, fast]) == (0, "slow")  # both finished: the lower index
    hold = threading.Event()
    with pytest.raises(ValueError, match="boom"):  # the first to finish failed: `get`'s error
        backend.get_first([slow_role.call(_Role.wait_for, hold), fast_role.call(_Role.fail)])
    hold.set()
    for handle in (slow_role, fast_role):
        handle.drain()
    unthreaded = InlineBackend(threaded=False)
    role = unthreaded.start("c", _Role)
    assert unthreaded.get_first([role.call(_Role.record, 1), role.call(_Role.record, 2)]) == (0, 1)


def test_existing_run_needs_resume_and_resume_needs_arun_driver(tmp_path):
    from moozi.errors import MooziError

    with pytest.raises(MooziError, match="no config.json"):
        Driver(_config(24), tmp_path / "nothing", resume=True, progress=False)
    (tmp_path / "run" / "checkpoints" / "ckpt-0000000001").mkdir(parents=True)
    with pytest.raises(MooziError, match="pass --resume"):
        Driver(_config(24), tmp_path / "run", progress=False)


def test_unwritable_run_directory_is_reported(tmp_path):
    from moozi.errors import MooziError

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(MooziError, match="not writable"):
        Driver(_config(24), blocker / "run", progress=False)


def _moozi(*args, timeout=120, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "moozi.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "tic_tac_tow"], "did you mean"),
        (["train", "tic_tac_toe", "--set", "planner.num_simulation=3"], "num_simulations"),
        (["train", "tic_tac_toe", "--set", "planner.num_simulations=lots"], "an integer"),
        (["train", "tic_tac_toe", "--set", "justakey"], "expected key=value"),
        (["train", "tic_tac_toe", "--set", "network.support.max_value=-1"], "invalid value for network.support.max_value"),
        (["train", "openspiel:matrix_rps"], "simultaneous"),
        (["eval", "/nonexistent/run"], "not a moozi run directory"),
        (["eval", "/nonexistent/run", "--opening-moves", "-1"], "--opening-moves must be a non-negative integer"),
        (["eval", "/nonexistent/run", "--ladder", "--opening-moves", "2"], "not a ladder option"),
        (["eval", "/nonexistent/run", "--ladder", "--sample"], "--sample is not a ladder option"),
        (["report", "/nonexistent/run"], "no run directory"),
        (["train"], "the following arguments are required"),
    ],
)
def test_cli_errors_are_one_line_with_exit_code_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, stderr = run_cli(args)
    assert code == 2, stderr
    assert message in stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert list(tmp_path.iterdir()) == [], "a failed command left files behind"


@pytest.mark.slow
def test_the_moozi_command_exits_2_with_one_line_on_a_bad_game(tmp_path):
    # The installed entry point as a shell runs it (the cases above call it in this process).
    result = _moozi("train", "tic_tac_tow", cwd=tmp_path)
    assert result.returncode == 2 and "did you mean" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == [], result.stderr


def test_cli_games_lists_presets():
    code, out, _ = run_cli(["games"])
    assert code == 0
    for preset in ("tic_tac_toe", "connect_four", "go9", "breakout", "cartpole"):
        assert preset in out
    assert "every atari:<game> without a preset of its own gets the atari preset" in out
    assert "every minatar:<game> without a preset of its own gets the minatar preset" in out


@pytest.mark.slow
def test_cli_train_eval_report_play(tmp_path):
    run_dir = tmp_path / "run"
    sets = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    result = _moozi("train", "tic_tac_toe", "--run-dir", str(run_dir), "--max-env-steps", "240", "--quiet", *sets, timeout=600)
    assert result.returncode == 0, result.stderr
    words = result.stdout
    assert "Trained openspiel:tic_tac_toe with muzero" in words and "Next:" in words, words
    assert f"moozi eval {run_dir}" in words and f"moozi play {run_dir}" in words, words
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 240 and summary["stop_reason"] == "max_env_steps"
    # The other commands in this process (one real process above guards the entry point): what
    # they compile, other tiny tic-tac-toe tests on this worker may already have compiled.
    code, out, err = run_cli(["train", "tic_tac_toe", "--run-dir", run_dir, "--max-env-steps", "480", "--quiet", "--resume", "--json"])
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["env_steps"] == 480 and summary["run_dir"] == str(run_dir)
    code, _, err = run_cli(["eval", run_dir, "--opponent", "random", "--games", "4", "--json", tmp_path / "e.json"])
    assert code == 0, err
    assert json.loads((tmp_path / "e.json").read_text())["games"] == 4
    code, _, err = run_cli(["report", run_dir])
    assert code == 0, err
    assert (run_dir / "report" / "summary.md").exists()
    code, out, err = run_cli(["play", run_dir, "--seat", "0"], stdin_text="hello\n99\n0\n1\n2\n3\n4\n5\n6\n7\n8\n")
    assert code == 0, err
    assert "Game over" in out


@pytest.mark.slow
def test_reanalyze_share_feeds_the_buffer(tmp_path):
    """With train.reanalyze_fraction > 0 the driver sends stored trajectories through the reanalyze worker."""
    summary = run_driver(
        _config(12 * STEPS_PER_ITERATION, **{"train.reanalyze_fraction": 0.5, "train.reanalyze_num_envs": 4}),
        tmp_path / "run",
    )
    assert summary["reanalyzed_steps"] > 0
    logged = [row["reanalyzed_steps"] for row in read_metrics(tmp_path / "run") if "reanalyzed_steps" in row]
    # The window after the last log line is not logged at stop (it is carried in the checkpoint,
    # so a resumed run logs it exactly as an uninterrupted one would).
    assert logged and 0 < sum(logged) <= summary["reanalyzed_steps"]


@pytest.mark.parametrize("agent_network", ["online", "target"])
@pytest.mark.slow
def test_in_training_tests_play_the_network_the_config_names(tmp_path, monkeypatch, agent_network):
    # With a moving-average target network, the tests (and so BEST) play the target network when
    # train.agent_network says so, and the online one otherwise.
    from moozi.training.roles.parameter_optimizer import ParameterOptimizer
    from moozi.training.roles.testing_worker import TestingRolloutWorker

    served, tested = {"online": [], "target": []}, []
    get_params, run_test = ParameterOptimizer.get_params, TestingRolloutWorker.run

    def spy_get_params(self, network="online"):
        variables = get_params(self, network)
        served[network].append(variables)
        return variables

    def spy_run(self, params, *args, **kwargs):
        tested.append(params)
        return run_test(self, params, *args, **kwargs)

    monkeypatch.setattr(ParameterOptimizer, "get_params", spy_get_params)
    monkeypatch.setattr(TestingRolloutWorker, "run", spy_run)
    config = _config(8 * STEPS_PER_ITERATION, **{
        "train.agent_network": agent_network, "optimizer.target_ema_decay": "0.5", "train.test_every_updates": "4"})
    run_driver(config, tmp_path / "run")
    assert len(tested) >= 2
    assert len(served["target"]) == (len(tested) if agent_network == "target" else 0)
    for variables in tested:
        assert any(variables is candidate for candidate in served[agent_network])
    if agent_network == "target":
        last_online = served["online"][-1]["params"]
        assert not all(np.array_equal(a, b) for a, b in zip(
            jax.tree.leaves(tested[-1]["params"]), jax.tree.leaves(last_online)))


@pytest.mark.slow
def test_the_in_training_test_plays_beside_the_next_iteration_and_keeps_the_state_it_tested(tmp_path, monkeypatch):
    # A test does not stop the loop: each test waits (up to 60 s) until an update has run after it
    # started, which only happens if the loop goes on while it plays. Each test is logged at the
    # update it tested, and BEST holds the parameters of that update, not those the learner
    # reached while the test played.
    from moozi.training.roles.parameter_optimizer import ParameterOptimizer
    from moozi.training.roles.testing_worker import TestingRolloutWorker

    updated, overlapped, tested = threading.Event(), [], []
    update, run_test = ParameterOptimizer.update, TestingRolloutWorker.run

    def spy_update(self, *args, **kwargs):
        updated.set()
        return update(self, *args, **kwargs)

    def spy_run(self, params, *args, **kwargs):
        updated.clear()
        metrics = run_test(self, params, *args, **kwargs)
        overlapped.append(updated.wait(timeout=60))
        tested.append(params)
        return metrics

    monkeypatch.setattr(ParameterOptimizer, "update", spy_update)
    monkeypatch.setattr(TestingRolloutWorker, "run", spy_run)
    config = _config(10 * STEPS_PER_ITERATION, **{"train.test_every_updates": "4"})
    run_driver(config, tmp_path / "run")
    assert len(tested) >= 2
    assert all(overlapped[:-1])  # the last test may end the run: no update follows it
    logged = [row["step"] for row in read_metrics(tmp_path / "run") if row.get("role") == "test"]
    assert logged == [4 * (i + 1) for i in range(len(tested))]  # each at the update it tested
    best = best_checkpoint(tmp_path / "run")
    meta = json.loads((best / "meta.json").read_text())
    assert meta["step"] in logged and meta["counters"]["updates"] == meta["step"]
    params = load_agent(tmp_path / "run").variables["params"]
    expected = tested[logged.index(meta["step"])]["params"]
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(expected)))


@pytest.mark.parametrize("stop", ["SIGTERM", "max_minutes"])
@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_a_stop_while_a_test_plays_drops_the_test_and_checkpoints_the_last_iteration(tmp_path, monkeypatch, stop):
    # A backgammon test can play for minutes. A stop that comes meanwhile must not cost the run the
    # iterations since its last checkpoint (it did: the wait on the test was given up and the whole
    # iteration in flight dropped with it). The test is dropped and cancelled instead.
    import time

    import moozi.training.driver as driver_module
    from moozi.training.roles.testing_worker import TestingRolloutWorker

    playing, ended = threading.Event(), []

    def endless_test(self, params, episodes, seed):
        playing.set()
        ended.append(self._cancelled.wait(timeout=60))  # plays until the run cancels it
        return {"test_win_rate": 0.0, "test_draw_rate": 0.0, "test_loss_rate": 1.0}

    monkeypatch.setattr(TestingRolloutWorker, "run", endless_test)
    config = _config(10_000 * STEPS_PER_ITERATION, **{"train.test_every_updates": "4", "train.stop_grace_seconds": "2",
                                                      "train.checkpoint_every_minutes": "60", "train.max_minutes": "60"})
    driver = Driver(config, tmp_path / "run", progress=False)
    # --max-minutes, reached at once when the test starts: the loop's limit and the waits' deadline.
    limit = driver_module.limit_reached
    monkeypatch.setattr(driver_module, "limit_reached",
                        lambda *args: "max_minutes" if stop == "max_minutes" and playing.is_set() else limit(*args))

    def stop_once_the_test_plays():
        if playing.wait(120):
            if stop == "SIGTERM":
                driver._stops.request("signal SIGTERM")
            else:
                driver._stops._deadline = time.monotonic()

    stopper = threading.Thread(target=stop_once_the_test_plays, daemon=True)
    stopper.start()
    try:
        summary = driver.run()
    finally:
        driver.close()
    stopper.join()
    assert ended == [True]  # cancelled, not played out
    assert summary["stop_reason"] == ("signal SIGTERM" if stop == "SIGTERM" else "max_minutes")
    assert summary["test_dropped_at_stop"] == 4
    # The checkpoint is the run's last iteration (with the stop given up on, none would have been written).
    meta = json.loads((latest_checkpoint(tmp_path / "run") / "meta.json").read_text())
    assert meta["counters"]["iteration"] == summary["iteration"] and meta["counters"]["updates"] == summary["updates"] >= 4
    assert meta["counters"]["tests"] == 0
    assert not [row for row in read_metrics(tmp_path / "run") if row.get("role") == "test"]


def test_a_replay_buffer_too_big_for_the_machine_is_refused_before_the_run_directory_exists(tmp_path, monkeypatch):
    from moozi.training import replay_memory

    config = tiny_config(**{"replay.capacity": 1_000_000})
    spec = env_spec(config)
    need = replay_bytes(config.replay, spec)
    monkeypatch.setattr(replay_memory, "available_memory_bytes", lambda: need)  # 70% of it is not enough
    with pytest.raises(MooziError) as info:
        Driver(config, tmp_path / "run", progress=False)
    message = str(info.value)
    assert "\n" not in message and "replay.capacity=1,000,000" in message and "GiB" in message
    suggested = int(message.split("--set replay.capacity=")[1].split()[0])
    assert replay_bytes(dataclasses.replace(config.replay, capacity=suggested), spec) <= 0.7 * need
    assert not (tmp_path / "run").exists()
    monkeypatch.setattr(replay_memory, "available_memory_bytes", lambda: 2 * need)  # fits: nothing refused
    replay_memory.check_replay_fits(config, spec)


@pytest.mark.slow
def test_cli_eval_of_a_one_player_game_caps_episodes_and_says_so(tmp_path):
    run_dir = tmp_path / "run"
    sets = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    code, _, err = run_cli(["train", "openspiel:catch", "--run-dir", run_dir, "--max-env-steps", "120", "--quiet", *sets])
    assert code == 0, err
    code, out, err = run_cli(["eval", run_dir, "--episodes", "3", "--max-steps", "2", "--json", tmp_path / "e.json"])
    assert code == 0, err
    assert "3 episodes of openspiel:catch, each cut after 2 steps" in out
    assert "3 of 3 episodes cut" in out and "bootstrap interval" in out
    assert "episode 3/3" in err  # the progress line
    saved = json.loads((tmp_path / "e.json").read_text())
    assert saved["games"] == 3 and saved["max_steps"] == 2 and saved["cut_episodes"] == 3
    code, _, err = run_cli(["eval", run_dir, "--episodes", "3", "--games", "4"])
    assert code != 0 and "disagree" in err
