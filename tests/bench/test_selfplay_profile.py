"""bench/selfplay_profile.py at its tiny size, and the im2col convolution it compares with lax.conv."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bench import selfplay_profile
from bench.conv_forms import conv_flops, im2col_conv, im2col_patches, lax_conv


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("kernel", [(3, 3), (5, 3)])
def test_im2col_conv_equals_lax_conv_forward_and_gradient(padding, kernel):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((2, 6, 7, 5)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((*kernel, 5, 3)) / 6, jnp.float32)
    highest = jax.lax.Precision.HIGHEST
    ref, mine = lax_conv(x, w, padding, highest), im2col_conv(x, w, padding, highest)
    assert mine.shape == ref.shape
    np.testing.assert_allclose(mine, ref, rtol=1e-5, atol=1e-5)
    g = jnp.asarray(rng.standard_normal(ref.shape), jnp.float32)

    def loss(conv):
        return lambda x_, w_: jnp.sum(conv(x_, w_, padding, highest) * g)

    for a, b in zip(jax.grad(loss(im2col_conv), (0, 1))(x, w), jax.grad(loss(lax_conv), (0, 1))(x, w)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_im2col_patches_order_and_flops():
    x = jnp.arange(2 * 3 * 3 * 2, dtype=jnp.float32).reshape(2, 3, 3, 2)
    patches = im2col_patches(x, (3, 3))
    assert patches.shape == (2, 3, 3, 18)
    # The centre cell's neighbourhood, row by row, channels innermost: its own channels sit at 4 * C.
    np.testing.assert_array_equal(patches[0, 1, 1].reshape(3, 3, 2), x[0])
    np.testing.assert_array_equal(patches[0, 0, 0, :2], [0, 0])  # the padding above and left
    assert conv_flops(32, 9, 9, 32, 32) == 2 * 32 * 81 * 9 * 32 * 32


def _check_report(report, capsys, case_name, parts, programs):
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last) == json.loads(json.dumps(report))  # ONE JSON object on stdout's last line
    assert report["benchmark"] == "selfplay_profile" and report["tiny"]
    assert len(report["commit"]) == 40 and report["command"]
    machine = report["machine"]
    assert machine["cpu"] and machine["device"].startswith(jax.default_backend())
    assert machine["matmul_gflops_at_start"] > 0 and machine["matmul_gflops_at_end"] > 0
    assert report["matmul_gflops"] == max(machine["matmul_gflops_at_start"], machine["matmul_gflops_at_end"])
    case = report["cases"][case_name]
    assert isinstance(case["config"], dict) and len(case["config_sha256"]) == 64
    assert case["config"]["env"]["num_envs"] == case["sizes"]["num_envs"] == 4
    assert case["iteration"]["env_steps"] == 4 * 3 and case["iteration"]["seconds"]["min"] > 0

    assert set(case["programs"]) == set(programs)
    for name, row in case["programs"].items():
        assert 0 < row["seconds"]["min"] <= row["seconds"]["median"], name
        assert row["flops_per_call"] > 0 and row["gflops_per_s"] > 0 and row["efficiency"] > 0, name
    for name in ("act_full", "act_fast", "selfplay_segment"):
        if name in case["programs"]:  # the search's FLOPs: XLA's one simulation, plus the other N - 1
            assert case["programs"][name]["flops_per_call"] >= case["programs"][name]["flops_xla_analysed"] > 0

    rows = {row["part"]: row for row in case["parts"]}
    assert set(rows) == set(parts)
    for name, row in rows.items():
        assert row["how"] in ("measured", "difference"), name
        if row["how"] == "measured":
            assert row["seconds_per_call"] > 0 and row["seconds_per_iteration"] > 0, name
        if name in ("network_root", "network_in_search", "history_stacking", "env_step_in_search",
                    "env_step_selfplay"):  # measured in a compiled loop, beside the loop's own cost
            assert row["seconds_per_call_stats"]["loop_calls"] == 4
            assert row["seconds_per_call_stats"]["harness"]["min"] > 0, name
    assert rows["network_root"]["flops_per_call"] > 0 and rows["network_in_search"]["flops_per_call"] > 0
    assert rows["history_stacking"]["flops_per_call"] > 0
    assert sum(row["share"] for row in case["parts"]) == pytest.approx(1.0, abs=1e-3)
    assert 0 < case["checks"]["measured_share"]

    learner = case["learner"]
    assert {row["part"] for row in learner["parts"]} == {
        "train_steps", "update_host", "replay_sample", "priority_update", "replay_insert"}
    for row in learner["parts"]:
        if row["how"] == "measured":
            assert row["seconds_per_call"] > 0, row["part"]
    assert sum(row["share"] for row in learner["parts"]) == pytest.approx(1.0, abs=1e-3)

    conv = case["conv3x3"]
    assert conv["channels_in"] == conv["channels_out"] == 4
    assert conv["max_abs_error_forward"] <= 1e-5 * max(1.0, conv["output_scale"])
    assert conv["max_abs_error_grad"] <= 1e-5 * max(1.0, conv["grad_scale"])
    for label in ("search_forward", "learner_forward_backward"):
        for form in ("lax_conv", "im2col"):
            row = conv[label][form]
            assert row["seconds"]["min"] > 0 and row["flops_analytic"] > 0 and row["flops_xla"] > 0
            assert row["gflops_per_s"] > 0
    return case


@pytest.mark.slow
def test_tiny_profile_of_go9_alphazero(capsys, tmp_path):
    out = tmp_path / "profile.json"
    report = selfplay_profile.main(["--tiny", "--cases", "go9", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    case = _check_report(report, capsys, "go9", programs={"selfplay_segment", "act_full", "act_fast", "train_step"},
                         parts={"network_root", "network_in_search", "history_stacking", "env_step_in_search",
                                "tree_ops", "search_rest", "env_step_selfplay", "segment_rest", "host_python"})
    assert case["agent"] == "alphazero" and case["game"] == "pgx:go_9x9" and case["path"] == "anakin"
    it = case["iteration"]  # playout cap randomisation: each step searched in full or fast, as its coin fell
    assert it["full_search_steps"] + it["fast_search_steps"] == 3
    assert it["simulations"] == 4 * it["full_search_steps"] + 2 * it["fast_search_steps"]
    assert case["conv3x3"]["height"] == case["conv3x3"]["width"] == 9


@pytest.mark.slow
def test_tiny_profile_of_connect_four_muzero(capsys):
    report = selfplay_profile.main(["--tiny", "--cases", "connect_four", "--statistic", "min"])
    case = _check_report(report, capsys, "connect_four", programs={"act_full", "train_step"},
                         parts={"network_root", "network_in_search", "history_stacking", "tree_ops", "search_rest",
                                "env_step_host", "host_python"})
    assert case["agent"] == "muzero" and case["path"] == "host" and report["statistic"] == "min"
    assert case["sizes"]["unroll_steps"] == 3 and case["iteration"]["full_search_steps"] == 3
    assert (case["conv3x3"]["height"], case["conv3x3"]["width"]) == (6, 7)


def test_refuses_to_write_into_bench_results():
    with pytest.raises(SystemExit, match="bench/results"):
        selfplay_profile.main(["--tiny", "--cases", "go9", "--out", str(selfplay_profile.RESULTS_DIR / "x.json")])


def test_refuses_an_unknown_case():
    with pytest.raises(SystemExit, match="unknown case"):
        selfplay_profile.main(["--tiny", "--cases", "go19"])
