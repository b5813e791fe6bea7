"""Game names to environments: presets, library-qualified names and user-registered games.

A name is a preset (`tic_tac_toe`, `breakout`, ...), a library-qualified name
`<library>:<game>` (`openspiel:go(board_size=9,komi=7.5)`, `minatar:breakout`,
`gym:CartPole-v1`, `atari:breakout`, `pgx:go_9x9`, `gymnax:Breakout-MinAtar`),
or a name given to `register_game`. Bridge modules are imported only when a
game of their library is asked for, so a missing optional extra only matters
for that library.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib
import inspect
from types import MappingProxyType
from typing import Callable, Union

from moozi.envs.base import Env, JaxEnv
from moozi.errors import MooziError, UnknownGameError

__all__ = [
    "PRESET_GAMES",
    "make_host_env",
    "make_played_env",
    "make_env",
    "resolve_game_name",
    "list_games",
    "is_jax_native",
    "register_game",
    "unregister_game",
]

AnyEnv = Union[Env, JaxEnv]

PRESET_GAMES: MappingProxyType = MappingProxyType(
    {
        "tic_tac_toe": "openspiel:tic_tac_toe",
        "connect_four": "openspiel:connect_four",
        "go9": "openspiel:go(board_size=9,komi=7.5)",
        "breakout": "minatar:breakout",
        "asterix": "minatar:asterix",
        "freeway": "minatar:freeway",
        "seaquest": "minatar:seaquest",
        "space_invaders": "minatar:space_invaders",
        "cartpole": "gym:CartPole-v1",
        # Chance games, for agent=stochastic_muzero (docs/stochastic.md).
        "2048": "pgx:2048",
        "backgammon": "pgx:backgammon",
    }
)


@dataclasses.dataclass(frozen=True)
class _Library:
    """Where one library's bridge lives and what it needs."""

    module: str  # the bridge module, imported on first use
    make: str  # its factory: make(game, **options)
    known: str  # its list of known games: known() -> list[str]
    packages: tuple[str, ...]  # top-level packages the bridge imports; their absence means a missing extra
    install: str  # how to get those packages
    jax_native: bool  # games are JaxEnv (pure, jittable) rather than host Env
    validates_names: bool = False  # the bridge raises UnknownGameError itself (with close matches)


_CORE = 'pip install -e .  (in the moozi checkout: it is a core dependency)'
_LIBRARIES: dict[str, _Library] = {
    # OpenSpiel's known_games() lists only the playable games, but a known yet
    # unplayable game (simultaneous moves, ...) must say why: the bridge checks names.
    "openspiel": _Library("moozi.envs.openspiel", "make", "known_games", ("pyspiel",), _CORE, False, True),
    "minatar": _Library("moozi.envs.minatar", "make", "known_games", ("minatar",), _CORE, False),
    "gym": _Library("moozi.envs.gym", "make_gym", "known_gym_games", ("gymnasium",), _CORE, False, True),
    "atari": _Library(
        "moozi.envs.gym", "make_atari", "known_atari_games", ("gymnasium", "ale_py"), 'pip install -e ".[atari]" (in the moozi checkout)', False,
        True,
    ),
    "pgx": _Library("moozi.envs.pgx", "make", "known_games", ("pgx",), 'pip install -e . (in the moozi checkout: pgx is one of its dependencies)', True),
    "gymnax": _Library("moozi.envs.gymnax", "make", "known_games", ("gymnax",), 'pip install -e ".[jax-envs]" (in the moozi checkout)', True),
}


@dataclasses.dataclass(frozen=True)
class _Custom:
    factory: Callable[..., AnyEnv]  # builds the env from make_env's options
    jax_native: bool  # the factory returns a JaxEnv


# The one piece of module state: games a user registered in this process
# (like gymnasium.register). Bridges and presets never change.
_CUSTOM: dict[str, _Custom] = {}


def register_game(name: str, factory: Callable[..., AnyEnv], *, jax_native: bool = False) -> None:
    """Makes `make_env(name, **options)` call `factory(**options)`; registering a name again replaces it."""
    if not name or ":" in name or name != name.strip():
        raise MooziError(f"cannot register game {name!r}: a custom name is a plain word without ':' or spaces")
    if name in PRESET_GAMES:
        raise MooziError(f"cannot register game {name!r}: it is a preset ({PRESET_GAMES[name]})")
    _CUSTOM[name] = _Custom(factory, jax_native)


def unregister_game(name: str) -> None:
    """Forgets a game given to `register_game` (a no-op for names never registered)."""
    _CUSTOM.pop(name, None)


def _closest(word: str, candidates, n: int = 3) -> list[str]:
    return difflib.get_close_matches(word, list(candidates), n=n, cutoff=0.6)


def _did_you_mean(matches: list[str]) -> str:
    return f" (did you mean {' or '.join(matches)}?)" if matches else ""


def _split(name: str) -> tuple[str, str]:
    """`name` -> (library, game) after presets; library is "" for custom games."""
    if not isinstance(name, str) or not name.strip():
        raise UnknownGameError(f"a game name must be a non-empty string, got {name!r}")
    name = name.strip()
    if name in _CUSTOM:
        return "", name
    name = PRESET_GAMES.get(name, name)
    if ":" not in name:
        # (what the user may have meant to type, what to suggest)
        candidates = [(n, n) for n in (*PRESET_GAMES, *_CUSTOM)]
        for library in ("openspiel", "minatar"):  # cheap to list: suggest their qualified names too
            with contextlib.suppress(MooziError, ImportError):
                targets = set(PRESET_GAMES.values())  # a preset already stands for these
                candidates += [(g, f"{library}:{g}") for g in _known(library) if f"{library}:{g}" not in targets]
        keys = {key for key, _ in candidates}
        close = _closest(name, keys)
        matches = list(dict.fromkeys(shown for key in close for k, shown in candidates if k == key))[:3]
        raise UnknownGameError(
            f"unknown game {name!r}{_did_you_mean(matches)}; presets: {', '.join(PRESET_GAMES)};"
            f" or use <library>:<game> with library one of {', '.join(_LIBRARIES)}"
        )
    library, game = (part.strip() for part in name.split(":", 1))
    if library.lower() in _LIBRARIES:
        library = library.lower()
    else:
        raise UnknownGameError(
            f"unknown game library {library!r} in {name!r}{_did_you_mean(_closest(library.lower(), _LIBRARIES))};"
            f" known libraries: {', '.join(_LIBRARIES)}"
        )
    if not game:
        raise UnknownGameError(f"{name!r} names no game; `moozi games` lists the {library} games")
    return library, game


@contextlib.contextmanager
def _extra_needed(library: str):
    """Turns the ImportError of a missing optional package into a one-line MooziError."""
    spec = _LIBRARIES[library]
    try:
        yield
    except ImportError as err:
        missing = (getattr(err, "name", None) or "").split(".")[0]
        if missing not in spec.packages:
            raise
        raise MooziError(f"{library} games need the Python package {missing!r}: {spec.install}") from None


def _bridge(library: str):
    with _extra_needed(library):
        return importlib.import_module(_LIBRARIES[library].module)


def _known(library: str) -> list[str]:
    """The library's game names without the `library:` prefix (bridges may list either form)."""
    module = _bridge(library)
    with _extra_needed(library):
        names = getattr(module, _LIBRARIES[library].known)()
    prefix = f"{library}:"
    return [name.removeprefix(prefix) for name in names]


def _check_game(library: str, game: str) -> None:
    """Raises UnknownGameError with the closest matches when the library does not know `game`."""
    if _LIBRARIES[library].validates_names:
        return
    known = _known(library)
    base = game.split("(", 1)[0]
    if base in known or base.lower() in {k.lower() for k in known}:
        return
    matches = [f"{library}:{m}" for m in _closest(base, known)]
    shown = ", ".join(known[:12]) + (f", ... ({len(known)} in all)" if len(known) > 12 else "")
    raise UnknownGameError(f"unknown {library} game {game!r}{_did_you_mean(matches)}; known: {shown}")


def resolve_game_name(name: str) -> str:
    """The canonical name: `<library>:<game>` for presets and qualified names, the name itself for custom games.

    Checks the name's form and library but imports no bridge, so it is cheap;
    whether the library knows the game is checked by `make_env`.
    """
    library, game = _split(name)
    return f"{library}:{game}" if library else game


def is_jax_native(name: str) -> bool:
    """Whether `make_env(name)` returns a JaxEnv (pure, jittable) rather than a host Env."""
    library, game = _split(name)
    return _CUSTOM[game].jax_native if not library else _LIBRARIES[library].jax_native


def _check_options(where: str, factory: Callable, options: dict, *, takes_game: bool) -> None:
    """Unknown options are user errors (a config typo), not TypeErrors deep in a bridge."""
    parameters = list(inspect.signature(factory).parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    if takes_game:  # a bridge's first parameter is the game name, not an option
        parameters = parameters[1:]
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    allowed = [p.name for p in parameters if p.kind in named]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise MooziError(f"unknown option(s) {', '.join(unknown)} for {where}; allowed: {', '.join(allowed) or 'none'}")


def make_env(name: str, **options) -> AnyEnv:
    """Builds the env that `name` names; `options` (e.g. seed) go to the bridge's factory."""
    library, game = _split(name)
    if not library:
        factory = _CUSTOM[game].factory
        _check_options(f"game {game!r}", factory, options, takes_game=False)
        return factory(**options)
    _check_game(library, game)
    factory = getattr(_bridge(library), _LIBRARIES[library].make)
    _check_options(f"{library} games", factory, options, takes_game=True)
    with _extra_needed(library):
        return factory(game, **options)


def list_games() -> dict:
    """Everything `moozi games` shows.

    Returns {"presets": {preset: qualified name}, "libraries": {library: [game, ...]},
    "unavailable": {library: how to install it}, "custom": [name, ...]}.
    """
    libraries, unavailable = {}, {}
    for library in _LIBRARIES:
        try:
            libraries[library] = sorted(_known(library))
        except (MooziError, ImportError) as err:  # a missing extra: say how to get it
            unavailable[library] = str(err)
    return {"presets": dict(PRESET_GAMES), "libraries": libraries, "unavailable": unavailable, "custom": sorted(_CUSTOM)}


def make_played_env(game_name: str) -> tuple[str, Env]:
    """(canonical name, env) of the game a trained agent plays against others.

    A run trained on the pgx twin of an OpenSpiel game (AlphaZero mode) plays the
    OpenSpiel game: opponents are OpenSpiel bots, and the agent's bot replays the
    moves in pgx.
    """
    from moozi.envs.twins import openspiel_twin

    canonical = resolve_game_name(game_name)
    canonical = openspiel_twin(canonical) or canonical
    return canonical, make_host_env(canonical)


def make_host_env(game_name: str, **options) -> Env:
    """`make_env`, with a one-player JAX-native game behind the host interface (`JaxSingleEnv`), for
    playing one episode at a time. Two-player pgx games stay JAX envs: their agents search from the
    game's state."""
    env = make_env(game_name, **options)
    if is_jax_native(game_name) and env.spec.num_players == 1:
        from moozi.envs.jax_vector import JaxSingleEnv

        env = JaxSingleEnv(env)
    return env
