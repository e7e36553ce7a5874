#!/usr/bin/env python3
"""Refits the simulator's machine values to measured points.

A coordinate search on the mean |log(predicted / measured)| over the points of a
validation file (benches/sim/measure.sh's format), each step scaling one parameter of
`Machine::shm` by 0.5-2x through `allreduce-sim --validate --param`; the 4-rank local
points are held out. Prints the fitted values and how many points, fitted and held out,
fall within 25%. Start values are session 8's; pass NAME=VALUE pairs to start elsewhere.
A coordinate search finds a local optimum that depends on where it starts: session 11's
values (docs/allreduce.md, "Simulator") came from two runs, the first on the 3-round
measurements from session 8's values, the second on the 5-round measurements from the
first's result (passed as NAME=VALUE), then rounding:

    cargo build --release -p tarantella-benches
    benches/sim/fit.py docs/sim-validation.txt shm_alpha=1.02e-6 ...
"""
import math
import pathlib
import subprocess
import sys

SIM = pathlib.Path(__file__).resolve().parents[2] / "target/release/allreduce-sim"
# Machine::shm's fields as of session 8.
START = {
    "shm_alpha": 0.81e-6, "shm_copy_bw_cache": 16.4e9, "shm_copy_bw_mem": 3.9e9,
    "net_alpha": 15.6e-6, "net_post_overhead": 2.8e-6, "net_stream_bw": 2.44e9,
    "net_stream_bw_cache": 2.75e9, "recv_overhead": 0.12e-6, "oversub_wake": 7e-6,
    "oversub_net_wake": 7e-6, "reduce_bw_cache": 22.7e9, "reduce_bw_mem": 6.5e9,
    "cache_bytes": 32 * 2**20, "host_mem_bw": 70e9,
}
STEPS = [0.5, 0.7, 0.85, 0.93, 1.07, 1.18, 1.4, 2.0]


def points(validation, params):
    """(machine, ranks, measured, predicted) per point, with `params` set."""
    args = [str(SIM), "--validate", validation]
    for name, value in params.items():
        args += ["--param", f"{name}={int(value) if name == 'cache_bytes' else value}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    rows = (line.split() for line in out.splitlines() if not line.startswith("#"))
    return [(f[0], int(f[1]), float(f[6]), float(f[7])) for f in rows if len(f) > 7 and f[1].isdigit()]


def held_out(p):
    return p[0] in ("shm", "tcp") and p[1] == 4


def within(ps):
    return sum(abs(p[3] / p[2] - 1) <= 0.25 for p in ps)


def cost(ps):
    fit = [p for p in ps if not held_out(p)]
    return sum(abs(math.log(p[3] / p[2])) for p in fit) / len(fit)


def main():
    validation = sys.argv[1] if len(sys.argv) > 1 else "docs/sim-validation.txt"
    params = dict(START)
    for pair in sys.argv[2:]:
        name, value = pair.split("=")
        params[name] = float(value)
    best = cost(points(validation, params))
    improved = True
    while improved:
        improved = False
        for name in list(params):
            for step in STEPS:
                trial = dict(params, **{name: params[name] * step})
                c = cost(points(validation, trial))
                if c < best - 1e-4:
                    best, params, improved = c, trial, True
    ps = points(validation, params)
    for name, value in params.items():
        print(f"{name}={value:.4g}")
    fitted = [p for p in ps if not held_out(p)]
    kept = [p for p in ps if held_out(p)]
    print(f"# mean |log error| {best:.3f}; within 25%: {within(fitted)} of {len(fitted)} fitted, "
          f"{within(kept)} of {len(kept)} held out")


if __name__ == "__main__":
    main()
