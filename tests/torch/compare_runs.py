"""Compares two allreduce_check.py runs: stock NCCL (baseline) and the preloaded plugin.

    python3 tests/torch/compare_runs.py BASELINE_DIR PLUGIN_DIR --ranks 2
Prints one line per result kind and a summary; exits 1 if any result differs by more than the
tolerance (nRanks ulps of the dtype at the result magnitude), or if the plugin's ranks are not
bit-identical.
"""
import argparse
import sys

import torch


BIT_VIEWS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def bits(t):
    """The raw bit pattern, so NaN == NaN and -0.0 != +0.0 in comparisons."""
    return t.view(BIT_VIEWS[t.dtype])


def load(run_dir, ranks):
    return [torch.load(f"{run_dir}/rank{r}.pt") for r in range(ranks)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("baseline")
    parser.add_argument("plugin")
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    base = load(args.baseline, args.ranks)
    plug = load(args.plugin, args.ranks)
    failures = 0
    exact = 0
    for key in sorted(base[0]):
        b = base[0][key]
        p = plug[0][key]
        for r in range(1, args.ranks):
            if not torch.equal(bits(plug[r][key]), bits(p)):
                print(f"FAIL {key}: plugin ranks 0 and {r} are not bit-identical")
                failures += 1
        bd, pd = b.double(), p.double()
        diff = (bd - pd).abs()
        finfo = torch.finfo(b.dtype)
        # Each run rounds the exact sum once or twice (fp32 accumulate, then the dtype): allow
        # nRanks ulps of the dtype at the result magnitude, and the smallest normal near zero.
        tol = args.ranks * finfo.eps * torch.maximum(bd.abs(), pd.abs()) + finfo.tiny
        bad = (diff > tol) & ~(torch.isnan(bd) & torch.isnan(pd))
        same = torch.equal(bits(b), bits(p))
        exact += int(same)
        if bad.any():
            failures += 1
            print(f"FAIL {key}: {int(bad.sum())} of {b.numel()} elements beyond tolerance, max diff {float(diff.max()):.3g}")
        else:
            kind = "bit-identical" if same else "within tolerance"
            print(f"ok   {key}: max |plugin - baseline| = {float(diff.max()):.3g} ({kind})")
    total = len(base[0])
    print(f"{total - failures} passed, {failures} failed ({exact} of {total} bit-identical to stock NCCL)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
