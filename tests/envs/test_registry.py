"""Game names to envs: presets, qualified names, errors, optional extras, custom games."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from moozi.envs import registry
from moozi.envs import PRESET_GAMES, is_jax_native, list_games, make_env, register_game, resolve_game_name, unregister_game
from moozi.errors import MooziError, UnknownGameError

EXPECTED_PRESETS = {
    "tic_tac_toe": "openspiel:tic_tac_toe",
    "connect_four": "openspiel:connect_four",
    "go9": "openspiel:go(board_size=9,komi=7.5)",
    "breakout": "minatar:breakout",
    "asterix": "minatar:asterix",
    "freeway": "minatar:freeway",
    "seaquest": "minatar:seaquest",
    "space_invaders": "minatar:space_invaders",
    "cartpole": "gym:CartPole-v1",
    "2048": "pgx:2048",
    "backgammon": "pgx:backgammon",
}


def test_presets_resolve():
    assert dict(PRESET_GAMES) == EXPECTED_PRESETS
    for preset, qualified in EXPECTED_PRESETS.items():
        assert resolve_game_name(preset) == qualified
        assert resolve_game_name(qualified) == qualified
    assert resolve_game_name(" OpenSpiel:chess ") == "openspiel:chess"


def test_make_env_builds_openspiel_games_with_options():
    env = make_env("go9", seed=4)
    assert env.spec.name == "openspiel:go(board_size=9,komi=7.5)"
    a, b = make_env("openspiel:pig", seed=4), make_env("openspiel:pig", seed=4)
    out_a, out_b = a.reset(), b.reset()
    for _ in range(30):
        out_a, out_b = a.step(1, out_a.is_last), b.step(1, out_b.is_last)
        np.testing.assert_array_equal(out_a.obs, out_b.obs)


# backgammon builds the largest network of them (15 s on 2 vCPUs): with the slow tests.
@pytest.mark.parametrize("preset", [pytest.param(p, marks=pytest.mark.slow) if p == "backgammon" else p
                                    for p in sorted(EXPECTED_PRESETS)])
def test_every_preset_builds_once_its_bridge_exists(preset):
    module = registry._LIBRARIES[EXPECTED_PRESETS[preset].split(":")[0]].module
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not written yet")
    if is_jax_native(preset):  # pgx's chance games (2048, backgammon): pure init(key), no seed option
        import jax

        env = make_env(preset)
        _, first = env.init(jax.random.PRNGKey(0))
    else:
        env = make_env(preset, seed=0)
        first = env.reset(seed=0)
    assert env.spec.name == resolve_game_name(preset)
    assert bool(first.is_first)


@pytest.mark.parametrize(
    "name, suggestion",
    [
        ("tic_tac_tow", "tic_tac_toe"),
        ("openspeil:go", "did you mean openspiel?"),
        ("openspiel:tic_tac_tow", "openspiel:tic_tac_toe"),
        ("chess", "openspiel:chess"),
        ("conect_four", "connect_four"),
    ],
)
def test_unknown_names_suggest_the_closest(name, suggestion):
    with pytest.raises(UnknownGameError) as info:
        make_env(name)
    message = str(info.value)
    assert suggestion in message and "\n" not in message


def test_unknown_library_lists_the_known_ones():
    with pytest.raises(UnknownGameError, match="known libraries: openspiel, minatar, gym, atari, pgx, gymnax"):
        resolve_game_name("mujoco:ant")
    with pytest.raises(UnknownGameError, match="names no game"):
        resolve_game_name("openspiel:")
    with pytest.raises(UnknownGameError):
        resolve_game_name("")


def test_unknown_options_are_user_errors():
    with pytest.raises(MooziError, match="unknown option.* sede .*allowed: seed"):
        make_env("tic_tac_toe", sede=1)


def test_is_jax_native():
    assert is_jax_native("pgx:go_9x9") and is_jax_native("gymnax:Breakout-MinAtar")
    assert not is_jax_native("tic_tac_toe") and not is_jax_native("breakout") and not is_jax_native("cartpole")


@pytest.fixture
def fake_library(monkeypatch, tmp_path):
    """A bridge module named `fake_bridge` under a library `fake`, with known games ["alpha", "beta"]."""
    (tmp_path / "fake_bridge.py").write_text(
        textwrap.dedent(
            """
            def make(game, *, seed=None):
                import moozi_fake_extra_pkg  # an optional extra nobody has installed
            def known_games():
                return ["alpha", "beta"]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    library = registry._Library(
        "fake_bridge", "make", "known_games", ("moozi_fake_extra_pkg",), 'pip install -e ".[jax-envs]" (in the moozi checkout)', True
    )
    monkeypatch.setitem(registry._LIBRARIES, "fake", library)
    return library


def test_missing_extra_names_the_install_command(fake_library):
    with pytest.raises(MooziError) as info:
        make_env("fake:alpha")
    assert str(info.value) == (
        "fake games need the Python package 'moozi_fake_extra_pkg': pip install -e \".[jax-envs]\" (in the moozi checkout)"
    )


def test_bridges_without_name_checks_get_them_from_the_registry(fake_library):
    with pytest.raises(UnknownGameError, match=r"unknown fake game 'alpah' \(did you mean fake:alpha\?\); known: alpha, beta"):
        make_env("fake:alpah")


def test_missing_extra_of_a_real_library(monkeypatch):
    monkeypatch.delitem(sys.modules, "moozi.envs.gymnax", raising=False)
    monkeypatch.setitem(sys.modules, "gymnax", None)  # makes `import gymnax` fail as if not installed
    with pytest.raises(MooziError, match=r'pip install -e "\.\[jax-envs\]"'):
        make_env("gymnax:Breakout-MinAtar")
    # pgx is one of moozi's own dependencies: a broken install is answered with moozi's install.
    monkeypatch.delitem(sys.modules, "moozi.envs.pgx", raising=False)
    monkeypatch.setitem(sys.modules, "pgx", None)
    with pytest.raises(MooziError, match=r"pip install -e \. \(in the moozi checkout: pgx is one of its dependencies\)"):
        make_env("pgx:tic_tac_toe")


def test_list_games():
    games = list_games()
    assert games["presets"] == EXPECTED_PRESETS
    assert set(games["libraries"]) | set(games["unavailable"]) == {"openspiel", "minatar", "gym", "atari", "pgx", "gymnax"}
    assert "tic_tac_toe" in games["libraries"]["openspiel"]
    assert "matrix_rps" not in games["libraries"]["openspiel"]
    # Names are listed without their library prefix, whatever form a bridge returns.
    assert not any(game.startswith(f"{lib}:") for lib, names in games["libraries"].items() for game in names)


class _Coin:
    """Not a real env: make_env passes options through and returns what the factory builds."""

    def __init__(self, *, seed=None):
        self.seed = seed


def test_register_game():
    try:
        register_game("coin", _Coin)
        assert resolve_game_name("coin") == "coin" and not is_jax_native("coin")
        assert make_env("coin", seed=3).seed == 3
        with pytest.raises(MooziError, match="unknown option.* size"):
            make_env("coin", size=3)
        register_game("coin", _Coin, jax_native=True)  # registering again replaces
        assert is_jax_native("coin")
    finally:
        unregister_game("coin")
    with pytest.raises(UnknownGameError):
        make_env("coin")
    with pytest.raises(MooziError, match="preset"):
        register_game("go9", _Coin)
    with pytest.raises(MooziError, match="without ':'"):
        register_game("openspiel:mine", _Coin)


def test_importing_moozi_envs_imports_no_bridge():
    code = "import sys, moozi.envs; print(sorted(m for m in ('pyspiel', 'minatar', 'gymnasium', 'pgx', 'gymnax') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
