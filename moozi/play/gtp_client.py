"""The controller's side of GTP: talking to engines, as a match referee does.

`GtpProcess` runs a GTP engine (GNU Go, `moozi gtp`, any other) as a
subprocess; `LocalEngine` puts a `moozi.play.gtp.GtpEngine` of this process
behind the same interface, so a trained agent plays a referee's match without
a second process. Both answer `send(command) -> (success, response text)`;
used by the referee (`moozi/play/gtp_referee.py`), `moozi eval --opponent
gnugo` and bench/gtp_match.py.
"""

from __future__ import annotations

import queue
import shlex
import subprocess
import threading
import time
from typing import Protocol

from moozi.errors import MooziError

__all__ = ["Engine", "EngineFailure", "GtpProcess", "LocalEngine"]


class EngineFailure(Exception):
    """The engine exited, timed out or wrote something that is no GTP response."""


class Engine(Protocol):
    command: str
    broken: bool  # a failure left the protocol stream in an unknown place: restart before reuse

    def start(self) -> None: ...
    def alive(self) -> bool: ...
    def restart(self) -> None: ...
    def send(self, command: str) -> tuple[bool, str]: ...
    def knows(self, command: str) -> bool: ...
    def close(self) -> None: ...


class GtpProcess:
    """One GTP engine as a subprocess: `send(command)` -> (success, response text)."""

    def __init__(self, command: str, timeout: float):
        self.command = command
        self.argv = shlex.split(command)
        self.timeout = timeout
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._known: dict[str, bool] = {}
        self.broken = False

    def start(self) -> None:
        try:
            self._process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as e:
            raise MooziError(f"cannot start {self.command!r}: {e.strerror or e}") from None
        self._lines = queue.Queue()
        self._known = {}
        self.broken = False
        threading.Thread(target=self._read, args=(self._process.stdout, self._lines), daemon=True).start()

    @staticmethod
    def _read(stream, lines: queue.Queue) -> None:
        for raw in stream:
            lines.put(raw.decode("utf-8", errors="replace"))
        lines.put(None)  # end of output

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def restart(self) -> None:
        self.close()
        self.start()

    def send(self, command: str) -> tuple[bool, str]:
        try:
            return self._exchange(command)
        except EngineFailure:
            self.broken = True
            raise

    def _exchange(self, command: str) -> tuple[bool, str]:
        if not self.alive():
            raise EngineFailure("the engine is not running")
        try:
            self._process.stdin.write(command.encode() + b"\n")
            self._process.stdin.flush()
        except OSError:
            raise EngineFailure("the engine closed its input") from None
        deadline = time.monotonic() + self.timeout
        first = self._next_line(deadline)
        while not first.strip():  # blank lines between responses are harmless
            first = self._next_line(deadline)
        if first[0] not in "=?":
            raise EngineFailure(f"not a GTP response: {first.rstrip()!r}")
        body = [first[1:].lstrip("0123456789").strip()]
        while True:
            line = self._next_line(deadline)
            if not line.strip():
                return first[0] == "=", "\n".join(body).strip()
            body.append(line.rstrip("\r\n"))

    def knows(self, command: str) -> bool:
        if command not in self._known:
            ok, text = self.send(f"known_command {command}")
            self._known[command] = ok and text.strip() == "true"
        return self._known[command]

    def _next_line(self, deadline: float) -> str:
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise EngineFailure(f"no response within {self.timeout:g} s") from None
        if line is None:
            raise EngineFailure("the engine exited")
        return line

    def close(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            try:
                self._process.stdin.write(b"quit\n")
                self._process.stdin.flush()
                self._process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._process = None


class LocalEngine:
    """A `GtpEngine` of this process behind `GtpProcess`'s interface: the same protocol, no pipe."""

    def __init__(self, engine, command: str = "moozi (in this process)"):
        self.command = command
        self.broken = False
        self._engine = engine  # moozi.play.gtp.GtpEngine

    def start(self) -> None:
        pass

    def alive(self) -> bool:
        return True

    def restart(self) -> None:
        pass

    def send(self, command: str) -> tuple[bool, str]:
        response = self._engine.respond(command + "\n")
        return response.startswith("="), response[1:].strip()

    def knows(self, command: str) -> bool:
        ok, text = self.send(f"known_command {command}")
        return ok and text == "true"

    def close(self) -> None:
        pass
