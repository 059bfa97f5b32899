#!/usr/bin/env python3
"""Draws a PNG from the JSON of nccl-lamport-bench (--json FILE).

Top panel: time per call (microseconds, max over ranks) against message size (bytes, log scale):
stock NCCL, NCCL's symmetric kernels (registered windows; drawn where the run measured them) and
nccl-lamport, eager and CUDA graph. Bottom panel: speedup over stock NCCL (stock time / time) of
nccl-lamport and of the symmetric kernels. Sizes where the plugin routes to NCCL are shaded.

    plot_results.py results.json --output results.png [--title TEXT]

nccl-lamport-bench --plot FILE runs this script itself when python3 and matplotlib are there.
"""

import argparse
import json
import sys


def size_label(nbytes):
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if nbytes >= (1 << shift) and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def series(results, mode, key):
    xs, ys = [], []
    for row in results:
        value = (row.get(mode) or {}).get(key)
        if value is not None:
            xs.append(row["bytes"])
            ys.append(value)
    return xs, ys


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="JSON written by nccl-lamport-bench --json")
    parser.add_argument("--output", "-o", required=True, help="PNG file to write")
    parser.add_argument("--title", help="plot title (default: GPU, ranks, dtype, NCCL version)")
    args = parser.parse_args(argv)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        print("plot_results.py: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return 2

    with open(args.json, encoding="utf-8") as handle:
        doc = json.load(handle)
    results = doc.get("results", [])
    if not results:
        print("plot_results.py: no results in " + args.json, file=sys.stderr)
        return 1

    ranks = doc.get("ranks") or [{}]
    options = doc.get("options", {})
    title = args.title or "{} x {}, {} {}, NCCL {}".format(
        doc.get("nRanks", "?"), ranks[0].get("gpu", "GPU"), options.get("dtype", "?"),
        options.get("op", "?"), ranks[0].get("nccl", "?"))

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 8),
                                      gridspec_kw={"height_ratios": [3, 2]})
    # One colour per implementation, one line style per timing mode.
    paths = (("ncclUs", None, "stock NCCL", "black"),
             ("symmetricUs", "symmetricSpeedup", "NCCL symmetric kernels", "tab:green"),
             ("lamportUs", "speedup", "nccl-lamport", "tab:red"))
    modes = (("eager", "eager", "--", "s"), ("graph", "CUDA graph", "-", "o"))
    for key, speedup_key, name, color in paths:
        for mode, mode_name, line, marker in modes:
            xs, ys = series(results, mode, key)
            if xs:
                top.plot(xs, ys, line, marker=marker, markersize=3, color=color,
                         label=f"{name}, {mode_name}")
            if speedup_key:
                xs, ys = series(results, mode, speedup_key)
                if xs:
                    bottom.plot(xs, ys, line, marker=marker, markersize=3, color=color,
                                label=f"{name}, {mode_name}")
    bottom.axhline(1.0, color="black", linewidth=0.8, label="stock NCCL (= 1)")

    for row in results:
        if row.get("path") not in ("lamport", "lamport-2shot"):
            for axis in (top, bottom):
                axis.axvspan(row["bytes"] / 1.41, row["bytes"] * 1.41, color="0.93", zorder=0)
        if not (row.get("check") or {}).get("ok", True):
            top.annotate("check", (row["bytes"], top.get_ylim()[1]), color="red", fontsize=7)

    top.set_xscale("log", base=2)
    top.set_yscale("log")
    plain = matplotlib.ticker.FormatStrFormatter("%g")
    top.yaxis.set_major_formatter(plain)
    top.yaxis.set_minor_formatter(plain)
    top.tick_params(axis="y", which="minor", labelsize=7)
    top.set_ylabel("time per call, \u00b5s (median, max over ranks)")
    top.set_title(title)
    top.grid(True, which="both", alpha=0.3)
    top.legend(fontsize=8)
    bottom.set_ylabel("speedup over stock NCCL\n(stock time / time)")
    shaded = any(row.get("path") not in ("lamport", "lamport-2shot") for row in results)
    bottom.set_xlabel("message size, bytes (log scale; K = 1024)"
                      + ("; shaded: nccl-lamport routes to NCCL" if shaded else ""))
    bottom.grid(True, which="both", alpha=0.3)
    # Room above the curves for the legend, so it never hides a point.
    low, high = bottom.get_ylim()
    bottom.set_ylim(min(low, 0.9), high + (high - low) * 0.45)
    bottom.legend(fontsize=7, ncol=3, loc="upper center")
    ticks = [row["bytes"] for row in results]
    bottom.set_xticks(ticks)
    bottom.set_xticklabels([size_label(b) for b in ticks], rotation=60, fontsize=7)
    fig.text(0.01, 0.005, doc.get("command", ""), fontsize=6, color="0.4")
    fig.tight_layout()
    fig.savefig(args.output, dpi=130)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
