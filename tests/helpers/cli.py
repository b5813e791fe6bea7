"""`moozi ARGV` in the test's own process, as a user's shell would see it: exit code, stdout, stderr.

In-process runs reuse what the worker has already compiled for the same settings (the builders cache
their jitted functions), where each `python -m moozi.cli` subprocess imports JAX and compiles
everything again; tests that guard the entry point itself still start one real process."""

from __future__ import annotations

import contextlib
import io
import sys

from moozi import cli


def run_cli(argv, stdin_text: str | None = None) -> tuple[int | str | None, str, str]:
    """(exit code, stdout, stderr) of `moozi ARGV`. Exceptions other than SystemExit propagate, so a
    traceback the user would see fails the calling test."""
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin_text) if stdin_text is not None else sys.stdin
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main([str(a) for a in argv])
            except SystemExit as e:
                code = e.code
    finally:
        sys.stdin = saved_stdin
    return code, out.getvalue(), err.getvalue()
