"""`moozi report`'s report.html: self-contained, its pictures load, and its replay is a legal game."""

import base64
import io
import json
import re

import pyspiel
import pytest
from PIL import Image

from moozi.config import build_config
from moozi.play.boards import board_grid, board_svg
from moozi.evaluation.report_page import write_report_page
from moozi.training.driver import Driver
from tests.helpers.tiny import STEPS_PER_ITERATION, run_driver, tiny_config


def _images(page: str) -> list[Image.Image]:
    """Every picture the page inlines, decoded; the page must load nothing from anywhere else."""
    sources = re.findall(r'<img[^>]*\ssrc="([^"]+)"', page)
    assert sources and all(s.startswith("data:image/") for s in sources), "report.html must be self-contained"
    assert not re.search(r'(src|href)="(https?:)?//|url\((https?:)?//', page)  # no fetch from anywhere
    images = []
    for source in sources:
        header, data = source.split(",", 1)
        image = Image.open(io.BytesIO(base64.b64decode(data)))
        image.load()
        assert image.format.lower() in header
        images.append(image)
    return images


def test_board_grid_reads_openspiel_diagrams():
    game = pyspiel.load_game("tic_tac_toe")
    state = game.new_initial_state()
    state.apply_action(4)
    assert board_grid(str(state)) == ["...", ".x.", "..."]
    go = pyspiel.load_game("go", {"board_size": 9})
    rows = board_grid(str(go.new_initial_state()))
    assert rows is not None and len(rows) == 9 and all(len(r) == 9 for r in rows)
    svg = board_svg(["x.o", "...", "..."])
    assert svg.count("<circle") == 2 and svg.startswith("<svg")


@pytest.mark.slow
def test_report_page_of_a_board_game_shows_a_legal_game(tmp_path):
    run_dir = tmp_path / "ttt"
    run_driver(tiny_config(**{"train.max_env_steps": 12 * STEPS_PER_ITERATION}), run_dir)
    page_path = write_report_page(run_dir)
    page = page_path.read_text()
    images = _images(page)
    assert len(images) >= 5  # three progress figures, the search, the logged groups
    replay = json.loads((run_dir / "report" / "replay.json").read_text())
    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    for action in replay["actions"]:
        assert action in state.legal_actions()
        state.apply_action(action)
    assert state.is_terminal() and list(state.returns()) == replay["returns"]
    assert page.count("<svg") == len(replay["actions"]) + 1  # the board before every move, and the final one
    assert "top moves by visit share" in page and "The search at one position" in page
    assert 'name="xaxis" value="env_steps"' in page and 'id="progress_minutes"' in page


@pytest.mark.slow
def test_report_page_of_a_one_player_game_animates_an_episode(tmp_path):
    overrides = {"agent": "ppo", "ppo.num_envs": 4, "ppo.rollout_steps": 8, "ppo.mlp_hidden_sizes": "16",
                 "train.test_every_updates": 16, "train.test_episodes": 2, "train.test_max_steps": 20,
                 "train.max_env_steps": 256}
    driver = Driver(build_config("gymnax:Breakout-MinAtar", overrides=overrides), tmp_path / "b", progress=False)
    try:
        driver.run()
    finally:
        driver.close()
    page = write_report_page(tmp_path / "b").read_text()
    gifs = [image for image in _images(page) if image.format == "GIF"]
    assert len(gifs) == 1 and gifs[0].n_frames >= 2 and gifs[0].size == (120, 120)  # 10x10 cells, 12 px each
    assert "A test episode" in page and "Return " in page
