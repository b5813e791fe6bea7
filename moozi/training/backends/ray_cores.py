"""Which cores of its node each Ray role runs on (`backend.role_cores`).

Each Ray role is a process of its own, and XLA:CPU sizes a process's thread pool by the cores the
process may run on when JAX first computes. Left alone, the learner's pool and a rollout worker's
pool are each as wide as the machine, and when the roles together ask for every core of a node
their threads may contend. Ray's `num_cpus` is a scheduling token, not a confinement, so the
backend can confine the roles itself:

* A role that asks for at least one whole CPU gets that many cores of its node, disjoint from the
  other such roles there, in the order they start (`slots`). Roles that ask for a fraction (the
  replay buffer, the testing worker) keep the whole node: they mostly wait, and a core of their own
  would be a core taken from the roles that compute.
* "auto" confines only where the roles' whole CPUs reach the node's cores: where a node has cores to
  spare, each role's XLA pool may still spread over them (a learner asking for 1 CPU on a 16-core
  machine is not held to one core). "on" always confines; "off", the default, never.
* The confinement happens in the actor's process, before the role's own constructor runs and so
  before the role's first JAX computation: every thread of the process is moved (`sched_setaffinity`),
  and threads started later (XLA's pool among them) inherit it. A node's core list is the actor's own
  view of it (`os.sched_getaffinity`), so the driver needs no knowledge of a remote machine; more
  slots than cores wrap around. Where the platform cannot confine (no `sched_setaffinity`), roles run
  unconfined.

Measured on 2 vCPUs (docs/performance.md): the go9 loop (learner and one rollout worker, one core
each) ran 124.9 and 117.2 env steps/s confined against 124.0 and 124.4 unconfined, so it stays off
by default; a prototype at an earlier commit had shown 101.8 -> 114.7.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple


class CoreSlot(NamedTuple):
    """A role's share of its node: cores `start` .. `start + count - 1` of the node's list (wrapping),
    `node_whole_cpus`: the whole CPUs all confined roles on that node ask for ("auto" compares it with the
    node's cores)."""

    start: int
    count: int
    node_whole_cpus: int


def whole_cpus(options: dict) -> int:
    """The whole CPUs a role's `ray.remote` resources ask for (0 for a fraction of one)."""
    return int(math.floor(float(options.get("num_cpus", 1.0)) + 1e-9))


def slots(roles: list[tuple[str, str | None, int]]) -> dict[str, CoreSlot]:
    """Role name -> its CoreSlot, for `roles` = (name, node id, whole CPUs) in start order; roles asking
    for no whole CPU get none (they keep their node's every core)."""
    per_node: dict[str | None, list[tuple[str, int]]] = {}
    for name, node, whole in roles:
        if whole >= 1:
            per_node.setdefault(node, []).append((name, whole))
    out = {}
    for members in per_node.values():
        total = sum(whole for _, whole in members)
        start = 0
        for name, whole in members:
            out[name] = CoreSlot(start, whole, total)
            start += whole
    return out


def chosen_cores(slot: CoreSlot, mode: str, available: list[int]) -> set[int] | None:
    """The cores a role with `slot` runs on, given its node's `available` cores, or None where it keeps them all."""
    if mode == "off" or not available or (mode == "auto" and slot.node_whole_cpus < len(available)):
        return None
    ordered = sorted(available)
    return {ordered[(slot.start + i) % len(ordered)] for i in range(min(slot.count, len(ordered)))}


def confine_process(cores: set[int]) -> None:
    """Every thread of this process onto `cores` (threads started later inherit it from their parent)."""
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else [str(os.getpid())]:
        try:
            os.sched_setaffinity(int(tid), cores)
        except (OSError, ValueError):  # a thread that ended meanwhile
            pass
    os.sched_setaffinity(0, cores)


def confined_class(cls: type, slot: CoreSlot, mode: str) -> type:
    """`cls` whose constructor first confines its process as `slot` and `mode` say (a subclass of the
    same name, so the role's errors and Ray's listings read as before)."""

    def __init__(self, *args, **kwargs):
        if hasattr(os, "sched_setaffinity"):
            cores = chosen_cores(slot, mode, sorted(os.sched_getaffinity(0)))
            if cores is not None:
                confine_process(cores)
        cls.__init__(self, *args, **kwargs)

    return type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__,
                                       "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})
