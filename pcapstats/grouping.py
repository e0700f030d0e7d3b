"""Group-by on arrays: the members of each group (numbered 0..n-1) as slices where they come
group by group, else as index lists; a group's value on each member; the most common value of
each group; unique values found by runs.  The analyses that group packets by a key (ping's
sessions, delay's exchanges) share these; numpy only.
"""

from __future__ import annotations

import numpy as np


def per_group(values: np.ndarray, group: np.ndarray, slices) -> np.ndarray:
    """``values[group]``: each group's value on each of its members, filled a group's range at
    a time where they come group by group (``slices``: group_slices')."""
    if slices is None:
        return values[group]
    out = np.empty(len(group), values.dtype)
    for k, rows in enumerate(slices):
        out[rows] = values[k]
    return out


def mode_per_group(group: np.ndarray, values: np.ndarray, n_groups: int, slices=None
                    ) -> np.ndarray:
    """The most common value of each group (the smallest on a tie), -1 for an empty group;
    ``values``: small non-negative integers (TTLs); ``slices``: group_slices', if any."""
    out = np.full(n_groups, -1, np.int64)
    if not len(group):
        return out
    if slices is not None:               # a count of each value, a group at a time
        for k, rows in enumerate(slices):
            if rows.stop > rows.start:
                out[k] = np.bincount(values[rows]).argmax()     # the first of the largest
        return out
    values = values.astype(np.int64)
    span = int(values.max()) + 1
    pairs, counts = unique_by_runs(group * span + values, counts=True)
    g, v = pairs // span, pairs % span
    best = np.lexsort((v, -counts, g))
    first = best[np.r_[True, g[best][1:] != g[best][:-1]]]
    out[g[first]] = v[first]
    return out


def group_slices(group: np.ndarray, n_groups: int) -> list[slice] | None:
    """For each group 0..n_groups-1, the slice of its members where they come group by
    group (group numbers never fall), else None (rows_by_group lists them)."""
    if not (group[1:] >= group[:-1]).all():
        return None
    bounds = np.searchsorted(group, np.arange(n_groups + 1)).tolist()
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def group_indices(rows) -> np.ndarray:
    """A group's members as indices (from a slice of group_slices, or rows_by_group's)."""
    return np.arange(rows.start, rows.stop) if isinstance(rows, slice) else rows


def rows_by_group(group: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """For each group 0..n_groups-1, the indices of its members (one sort, no mask per group)."""
    order = group_order(group, n_groups)
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    return [order[bounds[k]:bounds[k + 1]] for k in range(n_groups)]


def group_order(group: np.ndarray, n_groups: int) -> np.ndarray:
    """The indices that sort group numbers 0..n_groups-1 stably: none to sort when they come
    in order (one session after another), and numpy sorts 8- and 16-bit numbers by radix, in
    linear time, so a few groups among a million members cost little."""
    if (group[1:] >= group[:-1]).all():
        return np.arange(len(group))
    narrow = np.uint8 if n_groups <= 1 << 8 else np.uint16 if n_groups <= 1 << 16 else None
    return np.argsort(group if narrow is None else group.astype(narrow), kind="stable")


def unique_by_runs(values: np.ndarray, counts: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` (``return_counts`` with ``counts``), sorting
    only the first value of each run of equal neighbours: echo traffic comes in long runs
    (one session, one TTL), so a million values are a few runs to sort."""
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]]) if len(values) else \
        np.zeros(0, np.int64)
    lengths = np.diff(np.r_[starts, len(values)])
    unique, which = np.unique(values[starts], return_inverse=True)
    which = which.ravel()
    if counts:
        return unique, np.bincount(which, lengths, len(unique)).astype(np.int64)
    return unique, np.repeat(which, lengths)
