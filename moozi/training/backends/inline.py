"""The backend interface, and the inline backend: every role in this process.

The training loop makes the backend with `make_backend` (`SearchLoop` in
moozi/training/search_loop.py; for actor-critics on host games `ActorCriticLoop`,
actor_critic_loop.py, whose `HostTrainer` in actor_critic_host_loop.py starts
the roles), and talks to every role through `RoleHandle.call(Role.method, *args)`,
which runs that method of the role (the function of the role's class, so a
reader and an IDE go from the call to its definition; the role runs its own
class's method of that name) and returns a future, and `Backend.get(futures)`
(or `get_first`: the first of several to finish, for a queue of calls).
Inline calls run on the role's thread (or at once, without threads); Ray calls
run in the role's actor (`ray_backend.py`). Roles are plain classes either way:
Ray wraps them only at launch, so the role classes know nothing about Ray.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

from moozi.errors import MooziError

T = TypeVar("T")  # a role's class
P = ParamSpec("P")  # a role method's parameters
R = TypeVar("R")  # a role method's return type
R_co = TypeVar("R_co", covariant=True)


class RoleDiedError(MooziError):
    """A role's process died; the message names the role (also in `.role`)."""

    def __init__(self, role: str, message: str):
        super().__init__(message)
        self.role = role


class WaitInterrupted(MooziError):
    """A wait on the roles given up because the run was asked to stop (`reason`): the calls in
    flight are dropped, the last checkpoint stays the run's last."""

    def __init__(self, reason: str, waiting_for: str):
        super().__init__(f"stopped ({reason}) while waiting for {waiting_for}")
        self.reason = reason
        self.waiting_for = waiting_for


class Call(Protocol[R_co]):
    """A role's call in flight, whose value (of type R_co) `Backend.get` returns: a
    concurrent.futures.Future (inline, threaded), a finished `_Done` (inline, unthreaded) or a Ray
    ObjectRef. Only for the type checker: the backends never look at this class."""


def method_name(cls: type, method: Callable) -> str:
    """The name a role call dispatches on: the one under which the role's class `cls` holds `method`
    (its `__name__`, unless the class's method was replaced, as by a test's spy), else `method`'s
    own (a method of a protocol the role follows, e.g. `roles.TrainingWorker.run`)."""
    if isinstance(method, str):
        raise TypeError(f"a role call takes the role's method, e.g. handle.call(ReplayRole.ready), "
                        f"not its name {method!r}")
    if getattr(cls, method.__name__, None) is method:
        return method.__name__
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            if value is method:
                return name
    return method.__name__


class RoleHandle(Generic[T]):
    """A started role, an instance of T in this process or a Ray actor (`Backend.start`)."""

    name: str
    spec: tuple  # (the role's class, its constructor's arguments, its resources)

    def call(self, method: Callable[Concatenate[T, P], R], *args: P.args, **kwargs: P.kwargs) -> Call[R]:
        """Runs `method` (a function of the role's class, e.g. `ReplayRole.sample_batches`) on the
        role with `args`, after the role's earlier calls; returns its future. An argument may be
        another call's future (`Backend.resolve_arg`): the role gets its value."""
        return self._submit(method_name(self.spec[0], method), args, kwargs)

    def _submit(self, name: str, args: tuple, kwargs: dict) -> Any:
        raise NotImplementedError


class Backend(Protocol):
    """Where the roles live: `InlineBackend` (this module) or `ray_backend.RayBackend`. A `handle`
    is one of the backend's own (`start`'s)."""

    kind: str  # "inline" or "ray"
    interrupt: Callable[[], str | None] | None  # the driver's stop reason or None, set by the loop; waits poll it

    def start(self, name: str, cls: type[T], *args: Any, resources: dict | None = None,
              group: str = "learner") -> RoleHandle[T]: ...
    def launch(self) -> None: ...
    def cpus(self) -> float: ...
    def is_ready(self, handle: Any) -> bool: ...
    def wait_ready(self, handle: Any) -> None: ...
    def restart(self, handle: Any) -> Any: ...
    @overload
    def get(self, futures: list[Call[R]]) -> list[R]: ...
    @overload
    def get(self, futures: Call[R]) -> R: ...
    def get_first(self, futures: list[Call[R]]) -> tuple[int, R]: ...
    def put(self, value: R) -> Call[R]: ...
    def resolve_arg(self, future: Call[R]) -> Any: ...
    def kill(self, handle: Any) -> None: ...
    def shutdown(self) -> None: ...


POLL_SECONDS = 0.5  # how often a wait looks at the stop request


def check_interrupt(interrupt, waiting_for) -> None:
    reason = interrupt() if interrupt is not None else None
    if reason is not None:
        raise WaitInterrupted(reason, waiting_for())


def check_nonempty(futures: list) -> None:
    if not futures:
        raise ValueError("get_first needs at least one future")


class _Done:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _value(arg):
    """An argument's value: a future from another inline role's call is waited for."""
    if isinstance(arg, _Done):
        return arg.value
    if isinstance(arg, concurrent.futures.Future):
        return arg.result()
    return arg


class InlineHandle(RoleHandle[T]):
    """A role in this process. With a thread (the default), calls run in order on the role's own
    thread and return futures, as a Ray actor's do: the learner's update then overlaps the rollout,
    since compiled JAX code runs without holding the GIL. Without one, each call runs at once."""

    def __init__(self, name: str, obj: T, spec, threaded: bool = True):
        self.name = name
        self.obj = obj
        self.spec = spec  # (cls, args, resources): what `restart` builds again
        self._executor = (
            concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"moozi-{name}") if threaded else None
        )

    def _submit(self, name: str, args: tuple, kwargs: dict):
        def run():
            return getattr(self.obj, name)(*map(_value, args), **{k: _value(v) for k, v in kwargs.items()})

        if self._executor is None:
            return _Done(run())
        future = self._executor.submit(run)
        future.moozi_call = f"{self.name}.{name}"
        return future

    def drain(self) -> None:
        """Waits for the call in progress and drops the queued ones (before the role is closed)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)


class InlineBackend:
    kind = "inline"

    def __init__(self, threaded: bool = True):
        self.threaded = threaded
        self.interrupt: Callable[[], str | None] | None = None  # the driver's stop reason or None, set by the loop; `get` polls it

    def start(self, name: str, cls, *args, resources: dict | None = None, group: str = "learner") -> InlineHandle:
        return InlineHandle(name, cls(*args), (cls, args, resources), self.threaded)

    def cpus(self) -> float:
        """CPUs the roles can use: this machine's."""
        return float(os.cpu_count() or 1)

    def is_ready(self, handle) -> bool:
        return True

    def wait_ready(self, handle) -> None:
        pass

    def restart(self, handle: InlineHandle) -> InlineHandle:
        """A fresh instance of the role in place of `handle` (same name, same constructor arguments)."""
        handle.drain()
        close = getattr(handle.obj, "close", None)
        if close:
            close()
        cls, args, resources = handle.spec
        return self.start(handle.name, cls, *args, resources=resources)

    def get(self, futures):
        self._wait(futures if isinstance(futures, list) else [futures], every=True)
        if isinstance(futures, list):
            return [_value(f) for f in futures]
        return _value(futures)

    def get_first(self, futures: list) -> tuple[int, Any]:
        """(index, value) of the first of `futures` to finish, the lowest index among those finished;
        it waits as `get` waits. A `_Done` or plain value is finished at once."""
        check_nonempty(futures)
        self._wait(futures, every=False)
        index = next(i for i, f in enumerate(futures) if not isinstance(f, concurrent.futures.Future) or f.done())
        return index, _value(futures[index])

    def _wait(self, futures: list, every: bool) -> None:
        """Waits until every one (or one) of `futures` is finished, giving up on a stop request."""
        pending = {f for f in futures if isinstance(f, concurrent.futures.Future)}
        if not every and not all(isinstance(f, concurrent.futures.Future) for f in futures):
            return  # a value (or an unthreaded call's result) is finished at once
        return_when = concurrent.futures.ALL_COMPLETED if every else concurrent.futures.FIRST_COMPLETED
        while pending:
            done, pending = concurrent.futures.wait(pending, timeout=POLL_SECONDS, return_when=return_when)
            if done and not every:
                return
            if pending:
                check_interrupt(self.interrupt, lambda: ", ".join(getattr(f, "moozi_call", "a role") for f in pending))

    def put(self, value):
        return value

    def resolve_arg(self, future):
        """What to pass to another role's call: the future itself, waited for on that role's thread."""
        return future

    def kill(self, handle) -> None:
        pass

    def launch(self) -> None:
        pass  # inline roles exist as soon as they are started

    def shutdown(self) -> None:
        pass
