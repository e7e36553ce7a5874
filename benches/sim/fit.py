#!/usr/bin/env python3
"""Refits the simulator's machine values to measured points.

A coordinate search on the mean |log(predicted / measured)| over the points of a
validation file (benches/sim/measure.sh's format), each step scaling one parameter of
`Machine::shm` by 0.5-2x through `allreduce-sim --validate --param`; the 4-rank local
points are held out. Prints the fitted values and how many points, fitted and held out,
fall within 25%. It starts from `Machine::shm` as adopted (START); pass NAME=VALUE pairs
to start elsewhere, `--fix NAME` to leave a value where it starts (one measured directly),
and `--restarts N` (`--seed S`) to search again from N random perturbations of the optimum
found.

A coordinate search finds a local optimum that depends on where it starts. Session 12's
values (docs/allreduce.md, "Simulator") came from runs on session 11's values, then on
session 12's measurements (7 rounds), then again after `net_copy_bw` replaced the
cache/memory split of the stream; three restarts from random perturbations of the result
found the same optimum within 0.004 of the cost. Session 22's values came from a run on
session 20's first run (docs/sim-validation-20.txt) and six restarts. Session 24's came from
session 24's run (docs/sim-validation-24.txt). Session 25's came from a run on session 25's
run (docs/sim-validation-25.txt, the first with single-copy pushing its finished blocks)
from session 24's values and `oversub_migration` 0.5, with six restarts (`--restarts 6`,
seed 1), then rounded. Session 26's (the ones below, which `Machine::shm` carries), when
the cache began to hold each byte by its recency (`llc_by_reuse`, allreduce/src/sim/
recency.rs), came from session 25's run: a run from session 25's values (six restarts),
then one from its result with `llc_falloff=1.5` added (four restarts), then rounded. They
are checked on the runs not fitted to, which measured single-copy pulling: pass
`llc_bytes=0` to replay the pull (as a NAME=VALUE pair here, or `--param` to
allreduce-sim), e.g. `benches/sim/fit.py docs/sim-validation-24.txt llc_bytes=0`.
To refit after a new measurement:

    cargo build --release -p tarantella-benches
    benches/sim/measure.sh target/measured.txt 15
    benches/sim/fit.py target/measured.txt
"""
import argparse
import math
import pathlib
import random
import subprocess

SIM = pathlib.Path(__file__).resolve().parents[2] / "target/release/allreduce-sim"
# Machine::shm's fields as of session 26.
START = {
    "shm_alpha": 0.02e-6, "shm_copy_bw_cache": 39.0e9, "shm_copy_bw_mem": 11.4e9,
    "net_alpha": 0.35e-6, "net_post_overhead": 1.94e-6, "net_send_cpu": 2.0e-6,
    "net_recv_cpu": 3.04e-6, "net_stream_bw": 4.18e9, "net_copy_bw": 3.99e9,
    "net_copy_bw_cache": 8.42e9, "recv_overhead": 0.26e-6, "oversub_wake": 1.64e-6,
    "oversub_net_wake": 1.29e-6, "reduce_bw_cache": 55.2e9, "reduce_bw_mem": 5.22e9,
    "cache_bytes": 10_020_000, "host_mem_bw": 111e9, "core_cache_bytes": 564 * 2**10,
    "cross_core_bw": 7.86e9, "oversub_migration": 0.51, "llc_falloff": 1.5,
}
# Parameters that are shares, at most 1.
SHARES = {"oversub_migration"}
STEPS = [0.5, 0.7, 0.85, 0.93, 1.07, 1.18, 1.4, 2.0]
# Costs this close to the lowest are a tie (the restarts' spread at one optimum).
TIE = 0.001


def points(validation, params):
    """(machine, ranks, measured, predicted) per point, with `params` set."""
    args = [str(SIM), "--validate", validation]
    for name, value in params.items():
        args += ["--param", f"{name}={int(value) if name.endswith('_bytes') else value}"]
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


def search(validation, params, fixed=()):
    """The coordinate search from `params`, `fixed` left as they are: (cost, params) at its
    local optimum."""
    best = cost(points(validation, params))
    improved = True
    while improved:
        improved = False
        for name in [p for p in params if p not in fixed]:
            for step in STEPS:
                value = params[name] * step
                if name in SHARES:
                    value = min(value, 1.0)
                trial = dict(params, **{name: value})
                c = cost(points(validation, trial))
                if c < best - 1e-4:
                    best, params, improved = c, trial, True
    return best, params


def main():
    cli = argparse.ArgumentParser(description="Refits Machine::shm to a validation file.")
    cli.add_argument("validation", nargs="?", default="docs/sim-validation-25.txt")
    cli.add_argument("start", nargs="*", metavar="NAME=VALUE", help="start a value elsewhere")
    cli.add_argument("--restarts", type=int, default=0, help="searches from perturbed optima")
    cli.add_argument("--seed", type=int, default=1)
    cli.add_argument("--fix", action="append", default=[], metavar="NAME",
                     help="leave this value where it starts (e.g. one measured directly)")
    args = cli.parse_args()
    validation = args.validation
    params = dict(START)
    for pair in args.start:
        name, value = pair.split("=")
        params[name] = float(value)
    restarts, seed = args.restarts, args.seed
    fixed = set(args.fix)
    unknown = sorted(fixed - params.keys())
    if unknown:
        cli.error(f"--fix names no parameter being fitted: {', '.join(unknown)}")
    best, params = search(validation, params, fixed)
    # Restarts from random perturbations of the optimum: the lowest cost wins; optima within
    # TIE of it are told apart by their held-out points within 25%.
    found = [(best, params)]
    rng = random.Random(seed)
    for _ in range(restarts):
        start = {k: v if k in fixed else v * rng.uniform(0.7, 1.4) for k, v in params.items()}
        start = {k: min(v, 1.0) if k in SHARES else v for k, v in start.items()}
        found.append(search(validation, start, fixed))
    lowest = min(c for c, _ in found)
    tied = [(c, p) for c, p in found if c <= lowest + TIE]
    best, params = max(tied, key=lambda cp: within([q for q in points(validation, cp[1]) if held_out(q)]))
    ps = points(validation, params)
    for name, value in params.items():
        print(f"{name}={value:.4g}")
    fitted = [p for p in ps if not held_out(p)]
    kept = [p for p in ps if held_out(p)]
    print(f"# mean |log error| {best:.3f}; within 25%: {within(fitted)} of {len(fitted)} fitted, "
          f"{within(kept)} of {len(kept)} held out")


if __name__ == "__main__":
    main()
