"""A scripted GTP engine for the match tests: `genmove` answers from a fixed list, then `pass`.

    python scripted_gtp_engine.py [MOVE ...] [--refuse-play] [--log FILE]

Every other command succeeds with an empty result, `known_command` says
"false" (so the referee sends no `set_random_seed`), `play` fails with
`? illegal move` under --refuse-play, and `genmove` after the list is `pass`
(or an exit when the list ends with EXIT). --log appends each command received.
"""

import sys


def main(argv):
    refuse_play = "--refuse-play" in argv
    log = argv[argv.index("--log") + 1] if "--log" in argv else None
    moves = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--log")]
    for line in sys.stdin:
        command = line.split()
        if not command:
            continue
        if log:
            with open(log, "a") as f:
                f.write(line.strip() + "\n")
        name = command[0]
        if name == "genmove":
            move = moves.pop(0) if moves else "pass"
            if move == "EXIT":
                return
            reply = f"= {move}"
        elif name == "known_command":
            reply = "= false"
        elif name == "play" and refuse_play:
            reply = "? illegal move"
        else:
            reply = "= "
        sys.stdout.write(reply + "\n\n")
        sys.stdout.flush()
        if name == "quit":
            return


if __name__ == "__main__":
    main(sys.argv[1:])
