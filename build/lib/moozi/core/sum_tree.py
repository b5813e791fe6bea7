"""A sum tree (plus a min over positive leaves) for prioritized replay, in numpy.

Prioritized sampling needs "draw leaf i with probability w_i / sum(w)" and
"change some w_i" in O(log n) each (Schaul et al. 2016, appendix B.2.1).
Every operation works on a whole batch at once: updates recompute the touched
parents one tree level per step, and the prefix-sum descent walks all targets
down the tree together, so the Python loop is over the ~log2(n) levels, never
over batch elements.

Parents are recomputed from their children rather than adjusted by deltas, so
rounding never accumulates; float64 keeps the total exact enough for 1e6+ leaves.
"""

from __future__ import annotations

import numpy as np


class SumTree:
    """`capacity` non-negative leaf weights with their sum and their smallest positive value."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._size = 1 << max(0, (capacity - 1).bit_length())  # leaves, a power of two
        self._depth = self._size.bit_length() - 1
        # Node 1 is the root; node i has children 2i and 2i+1; leaf j is node size + j.
        self._sum = np.zeros(2 * self._size, np.float64)
        # The min tree ignores empty (zero) leaves: they hold +inf.
        self._min = np.full(2 * self._size, np.inf, np.float64)

    @property
    def total(self) -> float:
        return float(self._sum[1])

    @property
    def min_positive(self) -> float:
        """The smallest positive leaf (inf when every leaf is 0)."""
        return float(self._min[1])

    @property
    def leaves(self) -> np.ndarray:
        """A read-only view of the leaf weights [capacity]."""
        view = self._sum[self._size : self._size + self.capacity]
        view.flags.writeable = False
        return view

    def update(self, indices, values) -> None:
        """Sets leaves `indices` [n] to `values` [n] (>= 0). With repeated indices the last value wins."""
        indices = np.asarray(indices, np.int64).reshape(-1)
        values = np.broadcast_to(np.asarray(values, np.float64), indices.shape)
        if indices.size == 0:
            return
        if np.any(values < 0) or not np.all(np.isfinite(values)):
            raise ValueError("sum tree weights must be finite and non-negative")
        # Keep the last occurrence of each index: numpy leaves duplicate fancy
        # assignments unspecified.
        rev_unique, rev_first = np.unique(indices[::-1], return_index=True)
        values = values[::-1][rev_first]
        nodes = rev_unique + self._size
        self._sum[nodes] = values
        self._min[nodes] = np.where(values > 0, values, np.inf)
        for _ in range(self._depth):
            # Siblings share a parent: a repeated parent is written twice with the
            # same value (its children are final), cheaper than deduplicating.
            nodes = nodes >> 1
            left, right = 2 * nodes, 2 * nodes + 1
            self._sum[nodes] = self._sum[left] + self._sum[right]
            self._min[nodes] = np.minimum(self._min[left], self._min[right])

    def set_all(self, values) -> None:
        """Replaces every leaf [capacity] and rebuilds the tree in O(n)."""
        values = np.asarray(values, np.float64)
        if values.shape != (self.capacity,):
            raise ValueError(f"expected {self.capacity} leaves, got shape {values.shape}")
        if np.any(values < 0) or not np.all(np.isfinite(values)):
            raise ValueError("sum tree weights must be finite and non-negative")
        self._sum[:] = 0.0
        self._min[:] = np.inf
        self._sum[self._size : self._size + self.capacity] = values
        self._min[self._size : self._size + self.capacity] = np.where(values > 0, values, np.inf)
        lo = self._size
        while lo > 1:
            lo //= 2
            self._sum[lo : 2 * lo] = self._sum[2 * lo : 4 * lo : 2] + self._sum[2 * lo + 1 : 4 * lo : 2]
            self._min[lo : 2 * lo] = np.minimum(self._min[2 * lo : 4 * lo : 2], self._min[2 * lo + 1 : 4 * lo : 2])

    def find(self, targets) -> np.ndarray:
        """For each target u in [0, total), the leaf i with prefix(i) <= u < prefix(i) + w_i.

        `targets` [n] -> leaf indices [n]. Never returns a zero-weight leaf while
        total > 0: a descent never enters an empty subtree, which guards against
        rounding at u close to a boundary or to the total.
        """
        if not self._sum[1] > 0:
            raise ValueError("cannot sample from a sum tree whose total is 0")
        u = np.asarray(targets, np.float64).copy()
        nodes = np.ones(u.shape, np.int64)
        for _ in range(self._depth):
            left = self._sum[2 * nodes]
            right = self._sum[2 * nodes + 1]
            go_right = ((u >= left) & (right > 0)) | (left <= 0)
            u = np.where(go_right, u - left, u)
            nodes = 2 * nodes + go_right
        return nodes - self._size
