"""`moozi play RUN --web` as a person uses it: a real headless Chromium (Debian's `chromium`, driven by
Playwright) plays a whole tic-tac-toe game against a tiny trained run, clicking the board."""

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from moozi.play import load_agent
from moozi.play.web_play import WebPlay
from tests.helpers.tiny import STEPS_PER_ITERATION, run_driver, tiny_config

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("web") / "ttt"
    run_driver(tiny_config(**{"train.max_env_steps": 6 * STEPS_PER_ITERATION}), run_dir)
    return run_dir


@pytest.mark.slow
def test_web_play_api_refuses_illegal_moves_and_keeps_games_apart(tiny_run):
    play = WebPlay(load_agent(tiny_run))
    first, second = play.new(0), play.new(1)
    assert first["id"] != second["id"] and second["moves"] == 1  # the agent opened the second game
    after = play.move(first["id"], row=1, col=1)
    assert after["rows"][1][1] == "x" and after["moves"] == 2 and after["agent"]["top"]
    taken = play.move(first["id"], row=1, col=1)
    assert taken["message"].startswith("Illegal move") and taken["moves"] == 2
    assert play.new(5)["error"].startswith("seat must be 0")
    assert play.move("nope", row=0, col=0)["error"].startswith("no such game")
    assert play.undo(first["id"])["moves"] == 0
    assert len(play._games[second["id"]].actions) == 1  # moves in the first game left the second alone


def _stones(page) -> list[tuple[str, str, str]]:
    return [(s.get_attribute("data-row"), s.get_attribute("data-col"), s.get_attribute("class"))
            for s in page.query_selector_all("circle.stone")]


@pytest.mark.slow
@pytest.mark.skipif(BROWSER is None, reason="no chromium on this machine (.ci/run installs Debian's chromium)")
@pytest.mark.parametrize("opponent", ["a tiny run", "the shipped agent"])
def test_a_person_plays_a_whole_game_in_the_browser(tiny_run, tmp_path, opponent):
    sync_api = pytest.importorskip("playwright.sync_api")
    # The shipped agent: `moozi play tic_tac_toe --web` with nothing but the package (no run directory).
    agent = str(tiny_run) if opponent == "a tiny run" else "tic_tac_toe"
    server = subprocess.Popen([sys.executable, "-m", "moozi.cli", "play", agent, "--web", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = server.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+/) \(bound to 127\.0\.0\.1", line)
        assert match, (line, server.stderr.read() if server.poll() is not None else "")
        url = match.group(1)
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=BROWSER, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(url)
            page.wait_for_selector("rect.cell")
            assert page.inner_text("#status").startswith("Your move")
            page.click('rect.cell[data-row="1"][data-col="1"]')
            page.wait_for_function("document.querySelectorAll('circle.stone').length === 2")
            page.click('rect.cell[data-row="1"][data-col="1"]')  # taken: a message, not an error page
            page.wait_for_function("document.getElementById('message').textContent.startsWith('Illegal move')")
            assert len(_stones(page)) == 2
            other = browser.new_page()  # a second tab plays its own game
            other.goto(url)
            other.wait_for_selector("rect.cell")
            other.click('rect.cell[data-row="0"][data-col="0"]')
            other.wait_for_function("document.querySelectorAll('circle.stone').length === 2")
            page.screenshot(path=str(tmp_path / "mid_game.png"))
            while not page.inner_text("#result"):
                taken = {(r, c) for r, c, _ in _stones(page)}
                free = next((str(r), str(c)) for r in range(3) for c in range(3) if (str(r), str(c)) not in taken)
                count = len(taken)
                page.click(f'rect.cell[data-row="{free[0]}"][data-col="{free[1]}"]')
                page.wait_for_function(f"document.querySelectorAll('circle.stone').length > {count} "
                                       "|| document.getElementById('result').textContent !== ''")
            stones = _stones(page)
            mine = sum("player0" in s[2] for s in stones)
            theirs = sum("player1" in s[2] for s in stones)
            assert mine - theirs in (0, 1) and 5 <= len(stones) <= 9
            assert page.inner_text("#result") in ("You won!", "A draw.", "The agent won.")
            if opponent == "the shipped agent":  # it never loses to minimax, so not to these clicks
                assert page.inner_text("#result") != "You won!"
            assert len(_stones(other)) == 2  # the other tab's game was not touched
            browser.close()
        assert pathlib.Path(tmp_path / "mid_game.png").stat().st_size > 1000
    finally:
        server.terminate()
        server.wait(timeout=10)
