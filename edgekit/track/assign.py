"""Minimum-cost matching of tracks to detections (the Hungarian method) and box IoU.

:func:`linear_assignment` uses ``scipy.optimize.linear_sum_assignment`` when SciPy is installed and
a numpy implementation of the same shortest-augmenting-path method otherwise, so a device needs
numpy alone. Both give an optimal assignment; the matrices a tracker builds are small (tens of rows).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["box_iou", "linear_assignment", "solve_numpy"]


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) IoU of (N, 4) and (M, 4) xyxy boxes (0 where a box has no area)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0, None), axis=1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0, None), axis=1)
    top_left = np.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(bottom_right - top_left, 0, None), axis=2)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def solve_numpy(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of a minimum-cost assignment of a (N, M) matrix (numpy only).

    Every row of the smaller side is assigned, like ``scipy.optimize.linear_sum_assignment``.
    """
    cost = np.asarray(cost, dtype=np.float64)
    transposed = cost.shape[0] > cost.shape[1]
    a = cost.T if transposed else cost
    n, m = a.shape
    u, v = np.zeros(n + 1), np.zeros(m + 1)
    owner = np.zeros(m + 1, dtype=np.int64)  # owner[j]: the row (1-based) holding column j; 0: none
    way = np.zeros(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        owner[0], j0 = i, 0
        min_v = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, dtype=bool)
        while owner[j0] != 0:
            used[j0] = True
            i0 = owner[j0]
            free = ~used[1:]
            reduced = a[i0 - 1] - u[i0] - v[1:]
            better = free & (reduced < min_v[1:])
            min_v[1:][better] = reduced[better]
            way[1:][better] = j0
            candidates = np.where(free, min_v[1:], np.inf)
            j1 = int(np.argmin(candidates)) + 1
            delta = candidates[j1 - 1]
            u[owner[used]] += delta
            v[used] -= delta
            min_v[~used] -= delta
            j0 = j1
        while j0:
            j1 = way[j0]
            owner[j0] = owner[j1]
            j0 = j1
    cols = np.nonzero(owner[1:])[0]
    rows = owner[1:][cols] - 1
    order = np.argsort(rows)
    rows, cols = rows[order], cols[order]
    return (cols, rows) if transposed else (rows, cols)


def _solver() -> Callable[[np.ndarray], Any]:
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:
        return solve_numpy
    return linear_sum_assignment


_SOLVE = _solver()


def linear_assignment(cost: Sequence[Sequence[float]] | np.ndarray,
                      thresh: float) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Match rows to columns at least cost, keeping only pairs whose cost is at most ``thresh``.

    ``cost``: an (N, M) array or N rows of M numbers. Returns the matched (row, column) pairs, the
    unmatched rows and the unmatched columns. Costs above ``thresh`` are clipped before solving so
    one impossible pair cannot pull the others away from their best partners (as ByteTrack does).
    """
    rows_in = [list(map(float, r)) for r in cost]
    n = len(rows_in)
    m = len(rows_in[0]) if n else (np.shape(cost)[1] if np.ndim(cost) == 2 else 0)
    if n == 0 or m == 0:
        return [], list(range(n)), list(range(m))
    clipped = [[c if c <= thresh else thresh + 1e-4 for c in r] for r in rows_in]
    if n == 1 or m == 1:  # one row or one column: the cheapest entry (no solver needed)
        flat = [c for r in clipped for c in r]
        k = flat.index(min(flat))
        pairs = [(k // m, k % m)]
    else:
        rows, cols = _SOLVE(np.array(clipped))
        pairs = list(zip(rows.tolist(), cols.tolist()))
    matches = [(r, c) for r, c in pairs if clipped[r][c] <= thresh]
    used_rows, used_cols = {r for r, _ in matches}, {c for _, c in matches}
    return matches, [r for r in range(n) if r not in used_rows], [c for c in range(m) if c not in used_cols]
