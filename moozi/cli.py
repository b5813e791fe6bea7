"""The `moozi` command line: train, eval, play, gtp, report, games, agents (the public surface the README lists).

User errors (bad game names, config keys, inputs, files) print one line and
exit with code 2; they never show a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

from moozi._version import __version__
from moozi.errors import MooziError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's own code)
        print(f"moozi: error: {message} (see `moozi --help`)", file=sys.stderr)
        raise SystemExit(2)


_SIMULATIONS_HELP = ("MuZero / AlphaZero: simulations of the agent's search per move (default: the run's "
                     "planner.play_simulations, else its planner.num_simulations)")


_JSON_STDOUT = "-"  # `eval --json` without a path
_AGENT_HELP = "a run directory, or the name of an agent shipped with moozi (`moozi agents` lists them)"


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="moozi", description="A general game-playing system that learns to plan (MuZero in JAX).")
    parser.add_argument("--version", action="version", version=f"moozi {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    train = sub.add_parser("train", help="train an agent on a game")
    train.add_argument("game", help="a preset (tic_tac_toe, breakout, ...) or a library-qualified name")
    train.add_argument("--config", dest="config_file", help="a TOML or JSON file of settings")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override one setting, e.g. --set planner.num_simulations=50 (repeatable)")
    train.add_argument("--run-dir", help="where to write the run (default runs/<game>-<time>)")
    train.add_argument("--backend", choices=("inline", "ray"), default=None, help="where the roles run (default inline)")
    train.add_argument("--ray-address", default=None, help="join this Ray cluster instead of starting a local one")
    train.add_argument("--seed", type=int, default=None,
                       help="the run's seed: parameters, self-play and the tests follow from it (default: the config's "
                       "seed, 0)")
    train.add_argument("--max-minutes", type=float, default=None, metavar="M",
                       help="stop after M minutes of this invocation (train.max_minutes): a --resume'd run gets M "
                       "more minutes, counted from its restart; an optimizer.decay_over=run schedule spans the "
                       "minutes before the resume plus M, so a run resumed with the minutes it had left continues "
                       "its schedule where it stopped")
    train.add_argument("--max-env-steps", type=int, default=None, metavar="N",
                       help="stop once the whole run has taken N env steps, those before a --resume included "
                       "(train.max_env_steps): a decay_over=run schedule over env steps continues on resume")
    train.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its latest checkpoint")
    train.add_argument("--quiet", action="store_true", help="no progress line")
    train.add_argument("--json", action="store_true", help="end with the run's summary as one JSON line instead of words")

    ev = sub.add_parser(
        "eval", help="evaluate a trained run against an opponent, or rank its checkpoints (--ladder)",
        description="Play a run against an opponent (win/draw/loss with 95% intervals), or with --ladder play its "
        "checkpoints against each other and fixed anchors and fit Bradley-Terry Elo ratings (random = 0) with "
        "bootstrap intervals, written to RUN/ladder.json and RUN/ladder.png, or with --positions (connect_four) "
        "score its greedy moves on solver-labelled positions.",
    )
    ev.add_argument("run_dir", help=_AGENT_HELP)
    ev.add_argument("--opponent", default=None,
                    help="random (default) | minimax | mcts:N | solver (connect_four) | run:DIR (not with --ladder; "
                    "searches with its own run's planner.play_simulations) | pipcount (backgammon: a greedy "
                    "pip-count bot) | pubeval, gnubg (backgammon: Tesauro's public evaluator, GNU Backgammon's "
                    "network at 0 ply; need the [backgammon] extra) | gnugo[:LEVEL] (go: GNU Go through GTP, level "
                    "1 by default, colours "
                    "alternating; each game's margins by Tromp-Taylor and by GNU Go's dead-stone count; "
                    "needs Debian's gnugo package)")
    ev.add_argument("--games", type=int, default=None,
                    help="games to play (default 100); with --ladder, per pair, even (default 20)")
    ev.add_argument("--episodes", type=int, default=None,
                    help="one-player games: episodes to play (default 100; the same as --games)")
    ev.add_argument("--max-steps", type=int, default=None, metavar="S",
                    help="one-player games: cut each episode after S steps, counting its return so far "
                    "(default: the run's train.test_max_steps)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--checkpoint", default=None, metavar="WHICH",
                    help="which checkpoint plays: best (the in-training test's best, RUN/checkpoints/BEST) | latest | a "
                    "checkpoint directory (default: best if the run kept one, else latest)" " (not with --ladder)")
    ev.add_argument("--sample", action="store_true",
                    help="MuZero / AlphaZero: act as the training workers do (the search with its root noise, the "
                    "action drawn as in training) instead of greedily; PPO and IMPALA always sample (not with --ladder)")
    ev.add_argument("--simulations", type=int, default=None, metavar="N",
                    help=_SIMULATIONS_HELP + " (not with --ladder)")
    ev.add_argument("--opening-moves", type=int, default=0, metavar="N",
                    help="start each pair of games (one per seat) N uniformly random plies in: "
                    "greedy players otherwise repeat the same two games (not with --ladder)")
    ev.add_argument("--json", dest="json_file", nargs="?", const=_JSON_STDOUT, default=None, metavar="PATH",
                    help="with PATH: write the result there instead of to its default file. Alone (after RUN): "
                    "the default file is written as always and the result ends stdout as one JSON line instead of "
                    "the table, as `moozi train --json` ends with its summary. The default file: "
                    "RUN/eval-<opponent>.json for two players, RUN/eval-greedy.json for one, with -sampled for "
                    "--sample (RUN/eval-<opponent>-sampled.json, RUN/eval-sampled.json); RUN/eval-positions.json "
                    "with --positions; RUN/ladder.json, with the PNG beside it, with --ladder")
    ev.add_argument("--positions", action="store_true",
                    help="connect_four: the greedy move on every solver-labelled position (share that keeps the "
                    "result, share of best moves, per phase, next to a random mover; the value's sign "
                    "accuracy) instead of games; written to RUN/eval-positions.json unless --json")
    ev.add_argument("--ladder", action="store_true",
                    help="Elo ladder: checkpoints vs each other and the anchors, all pairs, both seats")
    ev.add_argument("--checkpoints", type=int, default=None, metavar="K",
                    help="ladder: K checkpoints evenly spaced, newest included (default all)")
    ev.add_argument("--anchors", default=None, metavar="LIST",
                    help="ladder: fixed players, random | minimax | mcts:N, comma-separated "
                    "(default random,mcts:100; random is always one)")
    ev.add_argument("--bootstrap", type=int, default=None, metavar="N",
                    help="ladder: resamples for the 95%% intervals (default 200)")

    play = sub.add_parser("play", help="play against a trained agent in the terminal, or in the browser (--web)")
    play.add_argument("run_dir", help=_AGENT_HELP)
    play.add_argument("--web", action="store_true", help="serve a page to play on (two-player board games)")
    play.add_argument("--port", type=int, default=8765, help="--web: the port (0: any free one)")
    play.add_argument("--host", default="127.0.0.1",
                      help="--web: the address to bind (default 127.0.0.1: this machine only)")
    play.add_argument("--seat", type=int, default=None, choices=(0, 1), help="your seat (asked if omitted)")
    play.add_argument("--simulations", type=int, default=None, metavar="N",
                      help=_SIMULATIONS_HELP)
    play.add_argument("--checkpoint", default=None, metavar="WHICH", help="which checkpoint plays: best (the in-training test's best, RUN/checkpoints/BEST) | latest | a "
                    "checkpoint directory (default: best if the run kept one, else latest)")

    gtp = sub.add_parser("gtp", help="play a run trained on go as a GTP engine on stdin/stdout (docs/go.md)")
    gtp.add_argument("run_dir", help=_AGENT_HELP)
    gtp.add_argument("--simulations", type=int, default=None, metavar="N",
                     help=_SIMULATIONS_HELP)
    gtp.add_argument("--checkpoint", default=None, metavar="WHICH", help="which checkpoint plays: best (the in-training test's best, RUN/checkpoints/BEST) | latest | a "
                    "checkpoint directory (default: best if the run kept one, else latest)")

    report = sub.add_parser("report", help="write RUN/report/report.html (curves, a game it played, a search) "
                                             "with its PNGs and summary.md")
    report.add_argument("run_dir")
    report.add_argument("--no-replay", action="store_true",
                        help="skip playing a game (or episode) with the run's agent: curves only")

    sub.add_parser("games", help="list known games and presets")
    sub.add_parser("agents", help="list the agents shipped with moozi: their strength and how they were trained "
                                  "(play one with `moozi play NAME`)")
    return parser


def _cmd_train(args) -> int:
    from moozi.config import build_config
    from moozi.config.overrides import parse_set_arguments
    from moozi.training.driver import Driver

    overrides = parse_set_arguments(args.overrides)
    if args.seed is not None:
        overrides["seed"] = args.seed
    if args.max_minutes is not None:
        overrides["train.max_minutes"] = args.max_minutes
    if args.max_env_steps is not None:
        overrides["train.max_env_steps"] = args.max_env_steps
    if args.backend is not None:
        overrides["backend.kind"] = args.backend
    if args.ray_address is not None:
        overrides["backend.ray_address"] = args.ray_address
    config = build_config(args.game, config_file=args.config_file, overrides=overrides)
    if args.run_dir:
        run_dir = pathlib.Path(args.run_dir)
    elif args.resume:
        raise MooziError("--resume needs --run-dir: the run to continue")
    else:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in args.game)
        run_dir = pathlib.Path("runs") / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}"
    driver = Driver(config, run_dir, resume=args.resume, progress=not args.quiet)
    # One line, before the first iteration's compiling (up to a minute on a CPU): the device (also
    # RUN/summary.json's "device") and where the run goes.
    compiling = "" if args.quiet else "; compiling, the first progress line within about a minute"
    print(f"device: {driver.device}; run: {run_dir}{compiling}", file=sys.stderr)
    try:
        summary = driver.run()
    finally:
        driver.close()
    if args.json:
        print(json.dumps({"run_dir": str(run_dir), **summary}, default=str))
    else:
        from moozi.runs.summary import describe

        print(describe(summary))
    return 0


def _cmd_eval(args) -> int:
    from moozi.play import load_agent
    from moozi.evaluation.gnugo import evaluate_against_gnugo, gnugo_level
    from moozi.evaluation.matches import evaluate, print_episode_progress

    if args.opening_moves < 0:
        raise MooziError(f"--opening-moves must be a non-negative integer, got {args.opening_moves}")
    if args.positions:
        return _cmd_positions(args)
    if args.ladder:
        if args.opening_moves:
            raise MooziError("--opening-moves is not a ladder option: the ladder plays from the initial state")
        if args.sample:
            raise MooziError("--sample is not a ladder option: the ladder's players are greedy")
        if args.simulations is not None:
            raise MooziError("--simulations is not a ladder option: the ladder's checkpoints search with the run's "
                             "planner.play_simulations")
        if args.checkpoint is not None:
            raise MooziError("--checkpoint is not a ladder option: the ladder plays the run's checkpoints (--checkpoints K)")
        if args.episodes is not None or args.max_steps is not None:
            raise MooziError("--episodes and --max-steps are for one-player games; the ladder plays two-player games (--games)")
        return _cmd_ladder(args)
    ladder_only = [name for name in ("checkpoints", "anchors", "bootstrap") if getattr(args, name) is not None]
    if ladder_only:
        raise MooziError(f"--{ladder_only[0]} is a ladder option: add --ladder")
    if args.episodes is not None and args.games is not None and args.episodes != args.games:
        raise MooziError(f"--episodes {args.episodes} and --games {args.games} disagree: give one of them")
    count = args.episodes if args.episodes is not None else args.games
    games = 100 if count is None else count
    if games < 1:
        raise MooziError(f"--{'episodes' if args.episodes is not None else 'games'} must be a positive integer, got {games}")
    if args.max_steps is not None and args.max_steps < 1:
        raise MooziError(f"--max-steps must be a positive integer, got {args.max_steps}")
    opponent = "random" if args.opponent is None else args.opponent
    level = gnugo_level(opponent)
    if level is not None and args.opening_moves:
        raise MooziError("--opening-moves: games against GNU Go start from the empty board")
    agent = load_agent(args.run_dir, checkpoint=args.checkpoint, sample=args.sample, simulations=args.simulations)
    print(f"checkpoint {agent.checkpoint}, {'sampled' if agent.sample else 'greedy'} play{_searching(agent)}")
    if level is not None:
        result = evaluate_against_gnugo(agent, games, args.seed, level, log=print)
    elif agent.spec.is_two_player:
        one_player_only = [name for name, value in (("--episodes", args.episodes), ("--max-steps", args.max_steps))
                           if value is not None]
        if one_player_only:
            raise MooziError(f"{one_player_only[0]} is for one-player games; {agent.config.game} has two players (use --games)")
        result = evaluate(agent, agent.config.game, opponent, games, args.seed, opening_moves=args.opening_moves)
    else:
        max_steps = agent.config.train.test_max_steps if args.max_steps is None else args.max_steps
        print(f"{games} episodes of {agent.config.game}, each cut after {max_steps:,} steps")
        result = evaluate(agent, agent.config.game, opponent, games, args.seed, opening_moves=args.opening_moves,
                          max_steps=max_steps, progress=print_episode_progress)
    sampled = "-sampled" if agent.sample else ""
    if agent.spec.is_two_player or level is not None:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in opponent)
        name = f"eval-{safe}{sampled}.json"
    else:  # no opponent: greedy and sampled play each keep their own file
        name = "eval-sampled.json" if agent.sample else "eval-greedy.json"
    _write_result(args, result, _result_file(args.run_dir, name))
    return 0


def _result_file(run_or_name: str, name: str) -> pathlib.Path | None:
    """Where an eval's result goes by default: the run directory; None for a shipped agent, whose
    directory is part of the installed package."""
    from moozi.play.shipped import agent_directory, is_shipped

    home = agent_directory(run_or_name)
    return None if is_shipped(home) else home / name


def _write_result(args, result, default: pathlib.Path | None) -> pathlib.Path | None:
    """Writes an eval's result file (--json PATH, else `default`; None: no default file) and prints the
    table, or with a bare --json the result as stdout's last line, in one JSON line (as `moozi train --json`)."""
    as_json = args.json_file == _JSON_STDOUT
    path = default if args.json_file in (None, _JSON_STDOUT) else pathlib.Path(args.json_file)
    text = result.to_json()
    if not as_json:
        print(result.format_table())
    if path is None:
        print("a shipped agent: its result is not written into the package (--json PATH writes it)",
              file=sys.stderr if as_json else sys.stdout)
        if as_json:
            print(json.dumps(json.loads(text)))
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    except OSError as e:
        raise MooziError(f"cannot write {path}: {e.strerror or e}") from None
    print(f"written {path}", file=sys.stderr if as_json else sys.stdout)
    if as_json:
        print(json.dumps(json.loads(text)))
    return path


def _searching(agent) -> str:
    """", 100 simulations per move" for a searching agent; "" for a policy."""
    return "" if agent.simulations is None else f", {agent.simulations} simulations per move"


def _cmd_positions(args) -> int:
    from moozi.play import load_agent
    from moozi.evaluation.position_eval import evaluate_agent_on_positions

    # `is not None`, not truthiness: `--games 0` is given too, and silently ignoring it would mislead.
    given = [name for name, value in (("--opponent", args.opponent), ("--games", args.games),
                                      ("--episodes", args.episodes), ("--max-steps", args.max_steps),
                                      ("--checkpoints", args.checkpoints), ("--anchors", args.anchors),
                                      ("--bootstrap", args.bootstrap)) if value is not None]
    given += [name for name, value in (("--ladder", args.ladder), ("--opening-moves", args.opening_moves),
                                       ("--sample", args.sample)) if value]
    if given:
        raise MooziError(f"{given[0]} is not a --positions option: --positions searches labelled positions, it plays no games")
    agent = load_agent(args.run_dir, checkpoint=args.checkpoint, simulations=args.simulations)
    print(f"checkpoint {agent.checkpoint}{_searching(agent)}")
    result = evaluate_agent_on_positions(agent, seed=args.seed)
    _write_result(args, result, _result_file(args.run_dir, "eval-positions.json"))
    return 0


def _cmd_ladder(args) -> int:
    from moozi.evaluation import ladder

    anchors = ladder.parse_anchors(args.anchors)
    result = ladder.run_ladder(
        args.run_dir,
        anchors=anchors,
        checkpoints=args.checkpoints,
        games_per_pair=ladder.DEFAULT_GAMES_PER_PAIR if args.games is None else args.games,
        bootstrap=ladder.DEFAULT_BOOTSTRAP if args.bootstrap is None else args.bootstrap,
        seed=args.seed,
        progress=ladder.print_progress,
    )
    path = _write_result(args, result, pathlib.Path(args.run_dir) / "ladder.json")
    try:
        png = ladder.write_ladder_png(result, path.with_suffix(".png"))
    except OSError as e:
        raise MooziError(f"cannot write the ladder's picture beside {path}: {e.strerror or e}") from None
    print(f"written {png}", file=sys.stderr if args.json_file == _JSON_STDOUT else sys.stdout)
    return 0


def _cmd_play(args) -> int:
    from moozi.play import load_agent
    from moozi.play.human import play_human

    agent = load_agent(args.run_dir, checkpoint=args.checkpoint, simulations=args.simulations)
    # --web: stdout's first line is the page's address (scripts read it), so this goes to stderr.
    print(f"checkpoint {agent.checkpoint}{_searching(agent)}", file=sys.stderr if args.web else sys.stdout)
    if args.web:
        from moozi.play.web_play import serve

        serve(agent, host=args.host, port=args.port)
        return 0
    play_human(agent, agent.config.game, human_player=args.seat)
    return 0


def _cmd_gtp(args) -> int:
    from moozi.play import load_agent
    from moozi.play.gtp import run_gtp

    agent = load_agent(args.run_dir, checkpoint=args.checkpoint, simulations=args.simulations)
    # stderr: GTP owns stdout.
    print(f"checkpoint {agent.checkpoint}{_searching(agent)}", file=sys.stderr)
    run_gtp(agent)
    return 0


def _cmd_report(args) -> int:
    import time as _time

    from moozi.evaluation.report_page import write_report_page

    started = _time.monotonic()
    page = write_report_page(args.run_dir, play=not args.no_replay)
    print(f"{page} ({page.stat().st_size / 1024:.0f} KiB, {_time.monotonic() - started:.0f} s): open it in a browser; "
          f"the PNGs and summary.md are beside it")
    return 0


def _cmd_agents(args) -> int:
    from moozi.play.shipped import describe, shipped_agents

    agents = shipped_agents()
    if not agents:
        print("no agents ship with this installation (train one: moozi train tic_tac_toe)")
        return 0
    for name, info in agents.items():
        print(describe(name, info))
    print("play one: moozi play NAME [--web]; measure one: moozi eval NAME --opponent ...; in Python: "
          "moozi.load_agent(NAME)")
    return 0


def _cmd_games(args) -> int:
    import textwrap

    from moozi.envs.registry import list_games

    for section, entries in list_games().items():
        if not entries:
            continue
        print(f"{section}:")
        items = entries.items() if isinstance(entries, dict) else ((name, None) for name in entries)
        for name, value in items:
            if isinstance(value, (list, tuple)):
                note = _LIBRARY_NOTES.get(name, "")
                if name == "gym":
                    playable = _playable("gym", value)
                    refused = len(value) - len(playable)
                    value = playable
                    note = (f" playable; {refused} more registered ids are not here: continuous actions, an "
                            "observation space moozi does not read, or a package this install lacks"
                            if refused else "")
                print(textwrap.fill(f"{name} ({len(value)}{note}):", width=100, initial_indent="  ",
                                    subsequent_indent="    "))
                print(textwrap.fill(", ".join(value), width=100, initial_indent="    ", subsequent_indent="    "))
            elif value is None:
                print(f"  {name}")
            else:
                print(f"  {name:16s} -> {value}")
    from moozi.config import LIBRARY_PRESETS

    for library in sorted(LIBRARY_PRESETS):
        print(f"every {library}:<game> without a preset of its own gets the {library} preset (moozi/config/presets.py)")
    return 0


# Libraries whose list `moozi games` does not filter (building each game would be slow, or download data).
# A library whose list `moozi games` does not filter (building each of its games takes seconds, and
# one, MNISTBandit, downloads a data set) gets a note instead.
_LIBRARY_NOTES = {"gymnax": "; those with continuous actions are refused when made"}


def _playable(library: str, names) -> list[str]:
    """The games of `names` that `make_env` builds here: a library's registry also holds ids it refuses
    (continuous actions) or cannot build without another package. For libraries whose games build
    in milliseconds (Gymnasium's: 58 in about 0.05 s)."""
    import warnings

    from moozi.envs.registry import make_env

    playable = []
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Gymnasium's "out of date" notices
                env = make_env(f"{library}:{name}")
        except (MooziError, ImportError):
            continue
        playable.append(name)
        close = getattr(env, "close", None)
        if close is not None:
            close()
    return playable


DEFAULT_COMPILATION_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "moozi", "jax")


def enable_compilation_cache() -> None:
    """Keeps compiled XLA programs between runs (a warm start skips most of the ~1 min of compiling).

    Set here, in the command-line entry point (and the benchmarks), never on import: library users
    choose their own JAX settings. MOOZI_JAX_CACHE="" turns it off.
    """
    cache_dir = os.environ.get("MOOZI_JAX_CACHE", DEFAULT_COMPILATION_CACHE)
    if not cache_dir:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def main(argv=None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command in ("train", "eval", "play", "gtp"):
        enable_compilation_cache()
    handler = {"train": _cmd_train, "eval": _cmd_eval, "play": _cmd_play, "report": _cmd_report, "games": _cmd_games,
               "gtp": _cmd_gtp, "agents": _cmd_agents}
    try:
        return handler[args.command](args)
    except MooziError as e:
        print(f"moozi: error: {e}", file=sys.stderr)
        return 2
    except MemoryError as e:
        # Settings that parse but do not fit this machine (replay.capacity=1e10): numpy refuses at once.
        reason = " ".join(str(e).split()) or "no memory left"
        print(f"moozi: error: out of memory: {reason}; lower replay.capacity, env.num_envs or train.batch_size",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("moozi: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
