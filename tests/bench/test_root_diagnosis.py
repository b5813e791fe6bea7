"""bench/root_diagnosis.py on a real MinAtar game: one line per checkpoint, shares that add up, the
legal moves named, and the Q range read from the same searches the agent played."""

from __future__ import annotations

import importlib
import json
import shutil

import numpy as np
import pytest

from tests.helpers.tiny_connect_four import fresh_run

from moozi.errors import MooziError

root_diagnosis = importlib.import_module("bench.root_diagnosis")


@pytest.mark.slow
def test_one_line_per_checkpoint_with_shares_over_the_legal_moves(tmp_path, capsys):
    run = fresh_run(tmp_path / "run", "freeway", **{"planner.search_policy": "gumbel_muzero"})
    root_diagnosis.main([str(run), "--steps", "6"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 1  # fresh_run keeps one checkpoint
    (line,) = lines
    assert line["moves"] == ["noop", "up", "down"]  # MinAtar Freeway's minimal action set
    assert line["steps"] == 6
    for key in ("prior", "target", "highest_q_share"):
        assert len(line[key]) == 3
        assert sum(line[key]) == pytest.approx(1.0, abs=2e-3)
    low, high = line["q_range_10_90"]
    assert 0.0 <= low <= line["q_range_median"] <= high
    # Shares of the 6 states searched: whole counts of states.
    counts = np.asarray(line["highest_q_share"]) * 6
    np.testing.assert_allclose(counts, np.round(counts), atol=0.02)


def test_a_run_without_checkpoints_is_named(tmp_path):
    run = fresh_run(tmp_path / "run", "freeway")
    for child in (run / "checkpoints").iterdir():
        if child.is_dir():
            shutil.rmtree(child)
    with pytest.raises(MooziError, match="holds no checkpoints"):
        root_diagnosis.main([str(run)])
