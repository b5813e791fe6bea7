"""bench/go_strength.py on a tiny go9 run: a result file a reviewer can trace, that the results page reads."""

from __future__ import annotations

import json
import os

import pytest
from tests.helpers.tiny_go import TINY_GO9_GROUP, tiny_go9_run

from moozi.evaluation.gnugo import GNUGO


@pytest.mark.xdist_group(TINY_GO9_GROUP)
@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(GNUGO), reason="GNU Go is not installed (apt-get install gnugo)")
def test_go_strength_writes_a_traceable_result(tmp_path_factory, tmp_path):
    from bench import go_strength, provenance, results_page

    run_dir = tiny_go9_run(tmp_path_factory, "alphazero")
    out = tmp_path / "go9.json"
    data = go_strength.main([str(run_dir), "--out", str(out), "--gnugo-games", "2", "--scale", "2",
                             "--random-games", "2", "--max-moves", "30"])
    saved = json.loads(out.read_text())
    assert saved == json.loads(json.dumps(data))
    assert len(saved["commit"]) == 40 and isinstance(saved["tree_clean"], bool)
    assert saved["config"]["game"] == json.loads((run_dir / "config.json").read_text())["game"]
    assert saved["machine"]["matmul_gflops_at_evaluation"] > 0
    assert len(saved["config_sha256"]) == 64 and saved["command"]
    assert provenance.problems("go9.json", saved) == []
    plays = [match["simulations"] for match in saved["vs_gnugo"]]
    assert plays[1] == 2 * plays[0] and all(m["games"] == 2 for m in saved["vs_gnugo"])
    assert saved["vs_random"]["games"] == 2
    level1 = saved["vs_gnugo_level1"]
    assert len(level1["margins"]) == len(level1["own_area"]) == len(level1["moves"]) == 2
    # The results page reads it as a go9 run.
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "go9.json").write_text(out.read_text())
    results = results_page.collect(results_page.read_files(tmp_path / "results"))
    assert len(results.go9) == 1
    lines, row = results_page.go9_section(results)
    assert row is not None and "GNU Go level 1" in row.result
