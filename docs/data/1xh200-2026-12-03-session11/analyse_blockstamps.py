#!/usr/bin/env python3
"""Reads the LAMPORT_DIAG lines of call1 (diag-lb2.log) and says whether some SMs finish their
block of the 2 MB stash kernel systematically later than others.

One sampled call of one rank = the lines of that rank whose globaltimer starts lie within 50 us
of each other. Only blocks 0-115 (four vectors per thread) are compared. For each SM, its mean
duration over the sampled calls is set against the spread within one call; the correlation of
per-SM durations between pairs of calls says whether the ranking repeats.
Usage: analyse_blockstamps.py diag-lb2.log.xz (or the uncompressed log)"""
import lzma
import re
import statistics as st
import sys
from collections import defaultdict

LINE = re.compile(r"LAMPORT_DIAG rank=(\d+) round=(\d+) block=(\d+) smid=(\d+) gstart=(\d+) "
                  r"pub_cyc=(-?\d+) end_cyc=(-?\d+)")


def ranks_of(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0] * len(values)
    for pos, i in enumerate(order):
        r[i] = pos
    return r


def spearman(a, b):
    ra, rb = ranks_of(a), ranks_of(b)
    return st.correlation(ra, rb)


def opener(path):
    if path.endswith(".xz"):
        return lzma.open(path, "rt", errors="replace")
    return open(path, errors="replace")


def main(path):
    rows = [tuple(int(x) for x in m.groups()) for m in map(LINE.search, opener(path)) if m]
    calls = []
    for rank in sorted({r[0] for r in rows}):
        mine = sorted((r for r in rows if r[0] == rank), key=lambda r: r[4])
        cur = [mine[0]]
        for r in mine[1:]:
            if r[4] - cur[-1][4] > 50_000:
                calls.append(cur)
                cur = []
            cur.append(r)
        calls.append(cur)
    print(f"{len(rows)} lines, {len(calls)} sampled calls (rank: blocks):",
          " ".join(f"{c[0][0]}:{len(c)}" for c in calls))
    per_sm = defaultdict(list)  # (rank, smid) -> durations over calls
    vectors = []
    for c in calls:
        four = [r for r in c if r[2] < 116]
        ends = [r[6] for r in four]
        starts = [r[4] for r in c]
        med = st.median(ends)
        print(f"rank {c[0][0]} round {c[0][1]}: start skew {max(starts) - min(starts)} ns; "
              f"end cycles median {med:.0f}, p90 {sorted(ends)[int(0.9 * len(ends))]}, max {max(ends)} "
              f"(+{max(ends) - med:.0f}); publish median {st.median(r[5] for r in four):.0f}; "
              f"slowest SMs {[r[3] for r in sorted(four, key=lambda r: -r[6])[:6]]}")
        for r in four:
            per_sm[(r[0], r[3])].append(r[6])
        vectors.append({r[3]: r[6] for r in four})
    for rank in sorted({k[0] for k in per_sm}):
        means = {sm: st.mean(v) for (rk, sm), v in per_sm.items() if rk == rank and len(v) > 1}
        within = [st.pstdev(v) for (rk, sm), v in per_sm.items() if rk == rank and len(v) > 1]
        if not means:
            continue
        m = sorted(means.values())
        print(f"rank {rank}: per-SM mean end cycles over calls: min {m[0]:.0f}, median {st.median(m):.0f}, "
              f"max {m[-1]:.0f}; typical within-SM stdev {st.median(within):.0f}")
    rhos = []
    for i in range(len(vectors)):
        for j in range(i + 1, len(vectors)):
            common = sorted(set(vectors[i]) & set(vectors[j]))
            if len(common) > 20:
                rhos.append(spearman([vectors[i][s] for s in common], [vectors[j][s] for s in common]))
    if rhos:
        print(f"rank correlation of per-SM durations between calls: median {st.median(rhos):.2f} "
              f"(min {min(rhos):.2f}, max {max(rhos):.2f}, {len(rhos)} pairs)")
    both_ranks(rows)


def both_ranks(rows, ghz=1.98):
    """The two ranks' grids of one call (same round): who starts first and by how much, how long
    blocks of four and of three vectors per thread take, and whether sharing an SM with a block
    of the same rank rather than of the other one matters. ghz: the SM clock (nvidia-smi's
    clocks.max.sm in call 1), to turn clock64 cycles into ns."""
    by_round = defaultdict(list)
    for r in rows:
        by_round[r[1]].append(r)
    offsets, tails, four, three, same, mixed = [], [], [], [], [], []
    for rs in by_round.values():
        if {r[0] for r in rs} != {0, 1}:
            continue
        first = [min(r[4] for r in rs if r[0] == k) for k in (0, 1)]
        offsets.append(abs(first[0] - first[1]))
        ends = [r[4] + r[6] / ghz for r in rs]
        tails.append(max(ends) - st.median(ends))
        ranks_on = defaultdict(set)
        for r in rs:
            ranks_on[r[3]].add(r[0])
        med4 = st.median(r[6] for r in rs if r[2] < 116)
        four.append(med4 / ghz)
        three.append(st.median(r[6] for r in rs if r[2] >= 116) / ghz)
        for r in rs:
            if r[2] < 116:
                (same if len(ranks_on[r[3]]) == 1 else mixed).append(r[6] - med4)
    if not offsets:
        return
    print(f"{len(offsets)} calls with both ranks: the later rank's first block starts "
          f"{st.median(offsets):.0f} ns after the other's (median; {min(offsets)} - {max(offsets)}); "
          f"last block end minus median block end {st.median(tails):.0f} ns (median)")
    print(f"block duration (median): four vectors per thread {st.median(four):.0f} ns, "
          f"three {st.median(three):.0f} ns")
    print(f"four-vector blocks sharing their SM with the same rank: {st.median(same):+.0f} cycles from "
          f"the call's median (n={len(same)}); with the other rank: {st.median(mixed):+.0f} (n={len(mixed)})")


if __name__ == "__main__":
    main(sys.argv[1])
