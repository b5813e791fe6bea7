"""bench/ship_agent.py on a tiny tic-tac-toe run: the figures a player would ask for, then the agent shipped."""

from __future__ import annotations

import json

import pytest
from tests.helpers.tiny_connect_four import fresh_run

from moozi.play import load_agent, shipped


@pytest.mark.slow  # ~75 s: compiles the search at two simulation counts and plays 8 games
def test_ship_agent_measures_writes_a_traceable_file_and_ships(tmp_path, monkeypatch):
    from bench import provenance, ship_agent

    monkeypatch.setattr(shipped, "SHIPPED_DIR", tmp_path / "agents")
    run = fresh_run(tmp_path / "run", "tic_tac_toe")
    out = tmp_path / "ship.json"
    data = ship_agent.main([str(run), "--out", str(out), "--games", "2", "--export",
                            "--trained-by", "moozi train tic_tac_toe --seed 0"])
    saved = json.loads(out.read_text())
    assert saved == json.loads(json.dumps(data)) and provenance.problems("ship.json", saved) == []
    assert set(saved["with_search"]) == set(saved["network_alone"]) == {"minimax", "random"}
    assert saved["network_alone"]["minimax"]["simulations"] == 1
    assert all(r["games"] == 2 for part in ("with_search", "network_alone") for r in saved[part].values())
    assert saved["seconds_per_move"] > 0 and saved["checkpoint"]["name"].startswith("ckpt-")
    info = shipped.shipped_agents()["tic_tac_toe"]
    assert info["result_file"] == "bench/results/ship.json" and info["simulations"] == saved["simulations"]
    assert info["strength"][0].startswith("vs minimax: ") and "the network alone" in info["strength"][0]
    assert load_agent("tic_tac_toe").config == load_agent(run).config
    # The results page reads it.
    from bench import results_page

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "2026-12-06-shipped-tic_tac_toe.json").write_text(out.read_text())
    results = results_page.collect(results_page.read_files(tmp_path / "results"))
    lines = results_page.shipped_section(results)
    assert lines[0] == "## Shipped agents" and sum(line.startswith("| tic_tac_toe |") for line in lines) == 2
