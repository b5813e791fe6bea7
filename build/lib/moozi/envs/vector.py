"""A batch of B host envs stepped as one, spread over P processes (thesis 5.2.3, Cleanba 4.1).

The number of envs B is a hyperparameter of the learning algorithm; the number
of processes P is a hardware setting: they are independent (Cleanba 4.1, as in
EnvPool), and the same seed gives the same batched outputs for every P.

- P = 1 steps the envs in the calling process: no subprocess, no copies
  beyond writing each env's output into the batch arrays.
- P > 1 starts P worker processes; worker k owns a contiguous slice of the
  envs. Inputs (actions, is_last) and outputs live in one block of
  `multiprocessing.shared_memory` that the workers read and write in place, so
  a step sends one byte to each worker and gets one byte back; nothing is
  pickled per step. Workers are started with `spawn` (forking a process that has
  JAX loaded is unsafe) and never import JAX; `make_env` must be picklable,
  e.g. `functools.partial(moozi.envs.minatar.make, "breakout")`, and scripts
  that use P > 1 need the usual `if __name__ == "__main__":` guard of `spawn`.

`step` is `step_async` then `step_wait`; with P > 1 a caller may compute
between the two while the workers step (e.g. prepare the next batch).

Env i is reset with seed `seed + i` on the first `reset()`. Episodes end and
restart per slot through `step(actions, is_last)` (each env is a continuous
task), so slots drift out of phase with each other, as intended.

The arrays of a returned StepOutput are read-only views of buffers that the
next `step` or `reset` overwrites: copy what you keep. This saves copying B
observations every step, and a caller that stores steps (the training worker)
copies them into its own trajectory arrays anyway.

An error raised by an env (e.g. IllegalActionError) is raised again by `step`
with its type and message. The failing env's slot keeps its previous output;
the other envs have stepped, so the batch is out of step with the caller:
`reset()` it before going on.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import multiprocessing as mp
import pickle
import signal
import traceback
import weakref
from multiprocessing import shared_memory
from typing import Callable, Sequence

import numpy as np

from moozi.envs.base import Env, EnvSpec, StepOutput
from moozi.errors import MooziError

__all__ = ["VectorEnv"]

# One-byte control messages between the parent and its workers.
_STEP, _RESET, _CLOSE, _MEMORY = b"s", b"r", b"c", b"m"
_OK, _ERROR = b"k", b"e"
_ALIGN = 64  # bytes; every array of the shared block starts on a cache line


def _fields(spec: EnvSpec, num_envs: int) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    """The arrays of the batch buffer: the six StepOutput fields, then the step inputs."""
    b = (num_envs,)
    return [
        ("obs", b + tuple(spec.obs_shape), np.dtype(np.float32)),
        ("is_first", b, np.dtype(np.bool_)),
        ("is_last", b, np.dtype(np.bool_)),
        ("reward", b, np.dtype(np.float32)),
        ("legal_actions", b + (spec.num_actions,), np.dtype(np.bool_)),
        ("to_play", b, np.dtype(np.int32)),
        ("actions", b, np.dtype(np.int64)),
        ("step_is_last", b, np.dtype(np.bool_)),
    ]


def _layout(spec: EnvSpec, num_envs: int) -> tuple[list[tuple[str, tuple, np.dtype, int]], int]:
    """(fields with their byte offsets, total size) of the batch buffer."""
    layout, offset = [], 0
    for name, shape, dtype in _fields(spec, num_envs):
        layout.append((name, shape, dtype, offset))
        size = int(np.prod(shape)) * dtype.itemsize
        offset += -(-size // _ALIGN) * _ALIGN
    return layout, max(offset, 1)


def _pinned(memory: shared_memory.SharedMemory):
    """A buffer over `memory` that keeps the SharedMemory object alive while any array uses it.

    numpy drops its buffer export as soon as an array is built, so a plain
    `memory.buf` cannot stop `SharedMemory.close()` (or its `__del__`) from
    unmapping the block under arrays still in use, which would crash on the
    next read. A ctypes array at the block's address that holds the
    SharedMemory object ties the mapping's lifetime to the last array.
    """
    probe = ctypes.c_char.from_buffer(memory.buf)
    address = ctypes.addressof(probe)
    del probe  # release the export, so the mapping can close once nothing uses it
    block = (ctypes.c_char * memory.size).from_address(address)
    block.owner = memory
    return block


class _Buffers:
    """Named numpy views of one memory block laid out by `_layout`."""

    def __init__(self, spec: EnvSpec, num_envs: int, buffer=None):
        layout, size = _layout(spec, num_envs)
        if buffer is None:
            buffer = bytearray(size)
        for name, shape, dtype, offset in layout:
            setattr(self, name, np.ndarray(shape, dtype, buffer=buffer, offset=offset))

    def output(self) -> StepOutput:
        """Read-only views of the output arrays, so callers cannot corrupt the next step's inputs."""
        views = []
        for name in StepOutput._fields:
            view = getattr(self, name).view()
            view.setflags(write=False)
            views.append(view)
        return StepOutput(*views)


class _Slice:
    """Envs [lo, hi) of the batch, writing their outputs into the batch buffers in place.

    Bridges with the optional fast path (OpenSpiel's), `step_into(action,
    is_last, buffers, index)` and `reset_into(seed, buffers, index)`, write
    their output into row `index` of the batch arrays themselves, with no
    StepOutput or numpy scalars built per step; other bridges go through `step()`.
    """

    def __init__(self, envs: Sequence[Env], lo: int):
        self.envs = list(envs)
        self.lo, self.hi = lo, lo + len(self.envs)
        self.bufs: _Buffers | None = None
        self.fast = all(
            callable(getattr(env, "step_into", None)) and callable(getattr(env, "reset_into", None))
            for env in self.envs
        )

    def _write(self, i: int, out: StepOutput) -> None:
        b = self.bufs
        b.obs[i] = out.obs
        b.is_first[i] = out.is_first
        b.is_last[i] = out.is_last
        b.reward[i] = out.reward
        b.legal_actions[i] = out.legal_actions
        b.to_play[i] = out.to_play

    def reset(self, seed: int | None) -> None:
        if self.fast:
            b = self.bufs
            for i, env in enumerate(self.envs, self.lo):
                env.reset_into(None if seed is None else seed + i, b, i)
            return
        for j, env in enumerate(self.envs):
            i = self.lo + j
            self._write(i, env.reset(seed=None if seed is None else seed + i))

    def step(self) -> BaseException | None:
        """Steps every env of the slice; returns the first error (its env keeps its previous output)."""
        b, lo, hi = self.bufs, self.lo, self.hi
        # Python ints and bools index and compare faster than numpy scalars.
        actions = b.actions[lo:hi].tolist()
        is_last = b.step_is_last[lo:hi].tolist()
        error = None
        if self.fast:
            for env, action, last, i in zip(self.envs, actions, is_last, range(lo, hi)):
                try:
                    env.step_into(action, last, b, i)
                except Exception as err:  # noqa: BLE001 - handed to the caller of VectorEnv.step
                    error = error or err
            return error
        for j, env in enumerate(self.envs):
            try:
                out = env.step(actions[j], is_last[j])
            except Exception as err:  # noqa: BLE001 - handed to the caller of VectorEnv.step
                error = error or err
                continue
            self._write(lo + j, out)
        return error

    def close(self) -> None:
        for env in self.envs:
            env.close()


# ------------------------------------------------------------------ workers
def _encode_error(err: BaseException) -> bytes:
    """The error as JSON bytes: its type's name, message and traceback (nothing is unpickled in the parent)."""
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return _ERROR + json.dumps({"type": type(err).__name__, "message": str(err), "traceback": tb}).encode()


class _RemoteTraceback(Exception):
    """Carries a worker's traceback as the `__cause__` of an error raised again in the parent."""

    def __str__(self) -> str:
        return self.args[0]


def _error_types() -> dict[str, type]:
    """Error types a worker's error is rebuilt as: moozi's own and Python's built-in ones."""
    import builtins

    from moozi import errors

    types = {name: obj for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, Exception)}
    types.update({name: obj for name, obj in vars(errors).items() if isinstance(obj, type) and issubclass(obj, Exception)})
    return types


def _decode_error(message: bytes, where: str) -> BaseException:
    data = json.loads(message[1:])
    cls = _error_types().get(data["type"])
    try:
        err = cls(data["message"]) if cls is not None else RuntimeError(f"{data['type']}: {data['message']}")
    except Exception:  # noqa: BLE001 - a built-in type whose constructor wants other arguments
        err = RuntimeError(f"{data['type']}: {data['message']}")
    err.__cause__ = _RemoteTraceback(f"\n(in {where})\n{data['traceback']}")
    return err


def _spec_to_bytes(spec: EnvSpec) -> bytes:
    return json.dumps(dataclasses.asdict(spec)).encode()


def _spec_from_bytes(data: bytes) -> EnvSpec:
    fields = json.loads(data)
    fields["obs_shape"] = tuple(fields["obs_shape"])
    if fields.get("action_names") is not None:
        fields["action_names"] = tuple(fields["action_names"])
    return EnvSpec(**fields)


def _worker_main(conn, make_env: Callable[[], Env], lo: int, hi: int) -> None:
    """A worker process: builds envs [lo, hi), then serves one-byte commands until told to close."""
    # Ctrl-C reaches the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    envs = None
    try:
        try:
            envs = _Slice([make_env() for _ in range(hi - lo)], lo)
            spec = envs.envs[0].spec
        except Exception as err:  # noqa: BLE001
            conn.send_bytes(_encode_error(err))
            return
        conn.send_bytes(_OK + _spec_to_bytes(spec))
        message = conn.recv_bytes()
        if message[:1] != _MEMORY:
            return
        name, num_envs = json.loads(message[1:])
        envs.bufs = _Buffers(spec, num_envs, _pinned(shared_memory.SharedMemory(name=name)))
        conn.send_bytes(_OK)
        while True:
            message = conn.recv_bytes()
            command = message[:1]
            if command == _STEP:
                error = envs.step()
            elif command == _RESET:
                error = None
                try:
                    envs.reset(json.loads(message[1:]))
                except Exception as err:  # noqa: BLE001
                    error = err
            else:
                break
            conn.send_bytes(_OK if error is None else _encode_error(error))
    except (EOFError, OSError, KeyboardInterrupt):
        pass  # the parent is gone: nothing to answer
    finally:
        if envs is not None:
            try:
                envs.close()
            except Exception:  # noqa: BLE001 - shutting down anyway
                pass
        conn.close()


class _Workers:
    """The processes, pipes and shared block of a VectorEnv; `shutdown` may run from a finalizer."""

    def __init__(self):
        self.processes: list = []
        self.conns: list = []
        self.memory: shared_memory.SharedMemory | None = None

    def shutdown(self) -> None:
        for conn in self.conns:
            try:
                conn.send_bytes(_CLOSE)
            except (OSError, ValueError):
                pass
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
        for conn in self.conns:
            conn.close()
        self.processes, self.conns = [], []
        if self.memory is not None:
            # Unlinking frees the name at once; the mapping goes with the last
            # array that uses it (see _pinned), so views a caller kept stay valid.
            try:
                self.memory.unlink()
            except FileNotFoundError:
                pass
            self.memory = None


def _slices(num_envs: int, num_processes: int) -> list[tuple[int, int]]:
    """Contiguous [lo, hi) ranges of near-equal size, one per process."""
    sizes = [num_envs // num_processes + (k < num_envs % num_processes) for k in range(num_processes)]
    bounds = np.cumsum([0] + sizes).tolist()
    return list(zip(bounds[:-1], bounds[1:]))


class VectorEnv:
    """B envs from `make_env`, stepped as one batch by `num_processes` processes.

    Every field of the StepOutputs has a leading [B] axis (see the module doc:
    read-only views that the next step overwrites).
    """

    def __init__(self, make_env: Callable[[], Env], num_envs: int, num_processes: int = 1, seed: int = 0):
        if num_envs < 1:
            raise MooziError(f"num_envs must be at least 1, got {num_envs}")
        if not 1 <= num_processes <= num_envs:
            raise MooziError(f"num_processes must be between 1 and num_envs ({num_envs}), got {num_processes}")
        self.num_envs = num_envs
        self.num_processes = num_processes
        self.seed = seed
        self._was_reset = False
        self._pending = False  # a step_async awaits its step_wait
        self._workers = _Workers()
        self._finalizer = weakref.finalize(self, self._workers.shutdown)
        if num_processes == 1:
            self._local = _Slice([make_env() for _ in range(num_envs)], 0)
            self.spec: EnvSpec = self._local.envs[0].spec
            self._check_specs([env.spec for env in self._local.envs])
            self._bufs = _Buffers(self.spec, num_envs)
            self._local.bufs = self._bufs
        else:
            self._local = None
            try:
                self._start_workers(make_env)
            except BaseException:
                self._finalizer()
                raise
        self._out = self._bufs.output()

    # ------------------------------------------------------------- public
    def reset(self, seed: int | None = None) -> StepOutput:
        """Starts a new episode in every env. Env i is reseeded with `seed + i`.

        With `seed=None` the first reset uses the constructor's seed and later
        ones continue each env's random stream (no reseeding).
        """
        self._check_open()
        if seed is None and not self._was_reset:
            seed = self.seed
        if self._local is not None:
            self._local.reset(seed)
            error = None
        else:
            payload = _RESET + json.dumps(seed).encode()
            for conn in self._workers.conns:
                conn.send_bytes(payload)
            error = self._gather()
        if error is not None:
            raise error
        self._was_reset = True
        return self._out

    def step(self, actions, is_last) -> StepOutput:
        """Takes `actions` [B] (augmented indices); env i resets instead where `is_last[i]`."""
        self.step_async(actions, is_last)
        return self.step_wait()

    def step_async(self, actions, is_last) -> None:
        """Starts a step; `step_wait` finishes it (the caller may compute meanwhile when P > 1)."""
        self._check_open()
        if not self._was_reset:
            raise RuntimeError("call VectorEnv.reset() before step()")
        if self._pending:
            raise RuntimeError("step_async called twice without step_wait")
        actions, is_last = np.asarray(actions), np.asarray(is_last)
        if actions.shape != (self.num_envs,) or is_last.shape != (self.num_envs,):
            raise ValueError(
                f"actions and is_last must have shape ({self.num_envs},), got {actions.shape} and {is_last.shape}"
            )
        np.copyto(self._bufs.actions, actions, casting="same_kind")
        np.copyto(self._bufs.step_is_last, is_last, casting="same_kind")
        self._pending = True
        if self._local is None:
            for conn in self._workers.conns:
                conn.send_bytes(_STEP)

    def step_wait(self) -> StepOutput:
        """Finishes the step started by `step_async` and returns its outputs."""
        if not self._pending:
            raise RuntimeError("step_wait called without step_async")
        self._pending = False
        error = self._local.step() if self._local is not None else self._gather()
        if error is not None:
            raise error
        return self._out

    def get_state(self) -> dict[str, np.ndarray]:
        """Snapshots of every env (`env{i}/...`), for checkpoints that resume mid-episode.

        Only in-process envs (P = 1) whose bridge has `get_state` can be
        snapshotted; otherwise this returns {} and a resumed run starts new episodes.
        """
        self._check_open()
        if self._local is None or not all(hasattr(env, "get_state") for env in self._local.envs):
            return {}
        return {f"env{i}/{k}": v for i, env in enumerate(self._local.envs) for k, v in env.get_state().items()}

    def set_state(self, snapshot: dict[str, np.ndarray]) -> None:
        """Restores what `get_state` returned; the next `step` continues those episodes."""
        self._check_open()
        if self._local is None:
            raise RuntimeError("VectorEnv.set_state needs num_processes=1")
        for i, env in enumerate(self._local.envs):
            prefix = f"env{i}/"
            env.set_state({k[len(prefix):]: v for k, v in snapshot.items() if k.startswith(prefix)})
        self._was_reset = True

    def close(self) -> None:
        """Closes the envs, stops the workers and frees the shared memory (idempotent)."""
        if self._local is not None:
            self._local.close()
            self._local = None
        self._out = self._bufs = None  # drop our views of the shared block before it closes
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._bufs is None

    def __enter__(self) -> "VectorEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----------------------------------------------------------- internals
    def _check_open(self) -> None:
        if self._bufs is None:
            raise RuntimeError("the VectorEnv is closed")

    def _check_specs(self, specs: Sequence[EnvSpec]) -> None:
        if any(s != specs[0] for s in specs):
            raise MooziError(f"make_env built envs with different specs: {sorted(set(map(str, specs)))}")

    def _start_workers(self, make_env: Callable[[], Env]) -> None:
        try:
            pickle.dumps(make_env)
        except Exception as err:
            raise TypeError(
                "make_env must be picklable for num_processes > 1, e.g."
                f" functools.partial(moozi.envs.minatar.make, 'breakout'): {err}"
            ) from None
        context = mp.get_context("spawn")
        workers = self._workers
        for lo, hi in _slices(self.num_envs, self.num_processes):
            parent_end, child_end = context.Pipe(duplex=True)
            process = context.Process(
                target=_worker_main, args=(child_end, make_env, lo, hi), name=f"moozi-env-{lo}-{hi}", daemon=True
            )
            process.start()
            child_end.close()
            workers.processes.append(process)
            workers.conns.append(parent_end)
        specs, error = [], None
        for k, conn in enumerate(workers.conns):
            message = self._receive(k)
            if message[:1] == _OK:
                specs.append(_spec_from_bytes(message[1:]))
            elif error is None:
                error = _decode_error(message, workers.processes[k].name)
        if error is not None:
            raise error
        self._check_specs(specs)
        self.spec = specs[0]
        _, size = _layout(self.spec, self.num_envs)
        workers.memory = shared_memory.SharedMemory(create=True, size=size)
        self._bufs = _Buffers(self.spec, self.num_envs, _pinned(workers.memory))
        for conn in workers.conns:
            conn.send_bytes(_MEMORY + json.dumps([workers.memory.name, self.num_envs]).encode())
        for k in range(len(workers.conns)):
            self._receive(k)

    def _receive(self, k: int) -> bytes:
        try:
            return self._workers.conns[k].recv_bytes()
        except (EOFError, OSError):
            code = self._workers.processes[k].exitcode
            raise RuntimeError(f"env worker {k} died (exit code {code})") from None

    def _gather(self) -> BaseException | None:
        """Waits for every worker's answer; returns the first error (all workers are always drained)."""
        error = None
        for k in range(len(self._workers.conns)):
            message = self._receive(k)
            if message != _OK and error is None:
                error = _decode_error(message, self._workers.processes[k].name)
        return error

