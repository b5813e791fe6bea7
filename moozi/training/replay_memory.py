"""Whether the replay buffer fits in this machine's memory, checked before anything is allocated."""

from __future__ import annotations

import dataclasses
import os

from moozi.config import Config
from moozi.core.replay import replay_bytes
from moozi.errors import MooziError

# Share of the memory available at start that the replay buffer may take: the rest is for the
# networks, the compiled programs, the envs, the rollouts in flight and everything else running.
REPLAY_MEMORY_SHARE = 0.7


def available_memory_bytes() -> int | None:
    """Memory available to new allocations (Linux's MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_replay_fits_here(config: Config, spec) -> None:
    """`check_replay_fits` where the replay buffer lives on this machine: always, but on a cluster."""
    if config.backend.ray_address is None:  # on a cluster the replay buffer may live on another node
        check_replay_fits(config, spec)


def check_replay_fits(config: Config, spec, available: int | None = None) -> None:
    """Refuses, before anything is allocated, a replay capacity that cannot fit in this machine's memory."""
    available = available_memory_bytes() if available is None else available
    if available is None:
        return
    need = replay_bytes(config.replay, spec)
    budget = REPLAY_MEMORY_SHARE * available
    if need <= budget:
        return
    capacity = config.replay.capacity
    fits = _largest_capacity_within(config.replay, spec, budget)
    raise MooziError(
        f"out of memory: replay.capacity={capacity:,} needs {need / 2**30:.1f} GiB for {spec.name} ({need / capacity:,.0f} bytes "
        f"per step), more than {REPLAY_MEMORY_SHARE:.0%} of the {available / 2**30:.1f} GiB of memory available; "
        f"set --set replay.capacity={fits} or less"
    )


def _largest_capacity_within(replay, spec, budget: float) -> int:
    """The largest capacity (a multiple of 1000 where one fits) whose buffer takes at most `budget` bytes;
    not proportional, as the priority trees round the capacity up to a power of two."""
    low, high = 0, replay.capacity
    while low < high:
        middle = (low + high + 1) // 2
        if replay_bytes(dataclasses.replace(replay, capacity=middle), spec) <= budget:
            low = middle
        else:
            high = middle - 1
    return low // 1000 * 1000 if low >= 1000 else low
