"""Numpy versions of the kernel's two hashing steps, numbered exactly as the C kernel numbers them.

- ``intern_addresses``: every distinct (address, IP version) gets a code in order of first
  appearance, scanning packets in order and each packet's source before its destination.
- ``conversations``: TCP and UDP packets get the id of their unordered endpoint pair, numbered
  per protocol in order of first appearance; ``reverse`` says the source is the larger endpoint
  (endpoint = address code x 65536 + port), and ``first`` marks each conversation's first packet.

pandas.factorize numbers keys in order of first appearance, which is what makes the two
implementations agree bit for bit (tests/test_kernel_equivalence.py checks it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..streams import first_occurrences


def intern_addresses(version, src16, dst16):
    n = len(version)
    ip = np.flatnonzero(version)
    both = np.empty((2 * len(ip), 16), np.uint8)
    both[0::2], both[1::2] = src16[ip], dst16[ip]
    v6 = np.repeat(version[ip] == 6, 2)
    halves = both.view("<u8").reshape(-1, 2)
    lo, lo_uniq = pd.factorize(halves[:, 0])
    key = lo.astype(np.int64) * 2 + v6
    if v6.any():
        hi, _ = pd.factorize(halves[:, 1])
        key += hi.astype(np.int64) * (2 * len(lo_uniq))
    codes, _ = pd.factorize(key)
    codes = codes.astype(np.int32)
    first = first_occurrences(codes)
    src_code = np.full(n, -1, np.int32)
    dst_code = np.full(n, -1, np.int32)
    src_code[ip], dst_code[ip] = codes[0::2], codes[1::2]
    return src_code, dst_code, both[first], v6[first].astype(np.uint8)


def conversations(l4, src_code, dst_code, srcport, dstport):
    n = len(l4)
    conv = np.full(n, -1, np.int64)
    reverse = np.zeros(n, np.uint8)
    first = np.zeros(n, np.uint8)
    for proto in (6, 17):
        idx = np.flatnonzero(l4 == proto)
        if len(idx) == 0:
            continue
        es = src_code[idx].astype(np.int64) * 65536 + srcport[idx]
        ed = dst_code[idx].astype(np.int64) * 65536 + dstport[idx]
        rev = es > ed
        lo, hi = np.where(rev, ed, es), np.where(rev, es, ed)
        lo_c, _ = pd.factorize(lo)
        hi_c, hi_u = pd.factorize(hi)
        ids, _ = pd.factorize(lo_c.astype(np.int64) * len(hi_u) + hi_c)
        conv[idx] = ids
        reverse[idx] = rev
        first[idx[first_occurrences(ids)]] = 1
    return conv, reverse, first
