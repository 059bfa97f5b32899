"""JAX/XLA all-reduce (psum over the local GPUs, one process) with and without nccl-lamport.

XLA loads NCCL itself, so this is the client that LD_AUDIT (or LD_PRELOAD, where XLA links
libnccl.so.2 directly) must reach. Each run writes its results to --out (an .npz file);
--compare A B checks two runs bit for bit and exits non-zero on any difference.

    python3 tests/clients/jax_psum_check.py --out /tmp/jax-stock.npz
    LD_AUDIT=/abs/libnccl-lamport-audit.so python3 tests/clients/jax_psum_check.py --out /tmp/jax-audit.npz
    python3 tests/clients/jax_psum_check.py --compare /tmp/jax-stock.npz /tmp/jax-audit.npz
"""
import argparse
import sys

import numpy as np

SIZES = [1, 7, 1024, 4097, 65536, 262145]
DTYPES = ["float32", "float16", "bfloat16"]


def run(out):
    import jax
    import jax.numpy as jnp

    devices = jax.local_devices()
    n_dev = len(devices)
    if n_dev < 2:
        print("SKIPPED: fewer than 2 GPUs visible to JAX")
        return 0
    psum = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")
    rng = np.random.default_rng(12345)
    results, failures = {}, 0
    for dtype in DTYPES:
        for n in SIZES:
            host = rng.standard_normal((n_dev, n)).astype(np.float32)
            x = jnp.asarray(host).astype(dtype)
            got = np.asarray(psum(x).astype(jnp.float32))
            exact = np.asarray(x.astype(jnp.float32), dtype=np.float64).sum(axis=0)
            # One rounding to dtype of an fp32 sum: within 2 ulp of dtype at the sum's magnitude.
            eps = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[dtype]
            tol = 2 * eps * (np.abs(exact) + np.abs(np.asarray(x.astype(jnp.float32))).sum(axis=0)) + 1e-30
            bad = int((np.abs(got - exact[None, :]) > tol[None, :]).sum())
            same = all(np.array_equal(got[0].view(np.uint32), got[r].view(np.uint32)) for r in range(n_dev))
            status = "ok" if bad == 0 and same else "FAIL"
            failures += status != "ok"
            print(f"psum {dtype} n={n}: {status} (outside tolerance: {bad}, identical on devices: {same})")
            results[f"{dtype}/{n}"] = got
    np.savez(out, **results)
    print(f"jax psum: {'PASS' if failures == 0 else 'FAIL'} ({failures} failing cases)")
    return 1 if failures else 0


def compare(a_path, b_path):
    a, b = np.load(a_path), np.load(b_path)
    diffs = [k for k in a.files if k not in b.files or not np.array_equal(a[k].view(np.uint32), b[k].view(np.uint32))]
    print(f"jax compare {a_path} vs {b_path}: {len(a.files) - len(diffs)}/{len(a.files)} bit-identical"
          + (f"; differ: {diffs}" if diffs else ""))
    return 1 if diffs else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--compare", nargs=2)
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        parser.error("--out or --compare is required")
    return run(args.out)


if __name__ == "__main__":
    sys.exit(main())
