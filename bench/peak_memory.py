"""Peak memory of a command and every process it starts, sampled while it runs.

    python bench/peak_memory.py [--every 0.5] -- moozi train atari:Pong --max-minutes 10

Sums the resident set size of the command's process tree (env worker
processes included) every `--every` seconds and reports the largest sum, the
command's exit code and its wall-clock time. Prints ONE JSON object on its
last line. psutil comes with the `[ray]` extra.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def tree_rss(process) -> int:
    import psutil

    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    import psutil

    start = time.monotonic()
    child = subprocess.Popen(command)
    process = psutil.Process(child.pid)
    peak = 0
    while child.poll() is None:
        try:
            peak = max(peak, tree_rss(process))
        except psutil.NoSuchProcess:
            break
        time.sleep(args.every)
    report = {
        "benchmark": "peak_memory",
        "command": " ".join(command),
        "exit_code": child.wait(),
        "seconds": round(time.monotonic() - start, 1),
        "peak_rss_gib": round(peak / 2**30, 3),
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    sys.exit(0 if main()["exit_code"] == 0 else 1)
