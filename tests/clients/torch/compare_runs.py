"""Compares two runs of a GPU check (allreduce_check.py, clients_check.py, pynccl_ctypes_check.py):
a baseline (stock NCCL) and a run through nccl-lamport.

    python3 tests/clients/torch/compare_runs.py BASELINE_DIR PLUGIN_DIR --ranks 2 [--label NAME]
Prints one line per result key and a summary line "N passed, M failed (...)"; exits 1 if any key
is missing from a run, differs from the baseline beyond what the check allows (bit-identical for
keys the check marked exact, else nRanks ulps of the dtype at the result magnitude), or if the
plugin run's ranks are not bit-identical. The rules are in common.compare_dirs.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import compare_dirs  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("baseline")
    parser.add_argument("plugin")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--label", default="", help="prefix for the summary line")
    args = parser.parse_args()
    prefix = f"{args.label}: " if args.label else ""
    lines = []
    failures = compare_dirs(args.baseline, args.plugin, args.ranks, emit=lines.append)
    for line in lines[:-1]:
        print(line)
    print(prefix + lines[-1])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
