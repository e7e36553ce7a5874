#!/usr/bin/env python3
"""Peer benchmark: PyTorch DistributedDataParallel (gloo) on the models of `train`.

Same models, global batch, rank count and thread count as `tarantella -n 2 -- train --profile`:
  python benches/peers/ddp_train.py --model lenet5 --batch-size 256
  python benches/peers/ddp_train.py --model mlp --hidden 4096,4096,1024 --batch-size 64

Reports the median step time (forward, backward with DDP's overlapped allreduce, optimizer)
and the exposed communication: median step time minus the median step time of the same steps
under `no_sync()` (no allreduce at all). Not part of the test path.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def mlp(hidden):
    layers, width = [nn.Flatten()], 28 * 28
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def worker(rank, world, args, port, results):
    torch.set_num_threads(args.threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(42)
    model = lenet5() if args.model == "lenet5" else mlp([int(h) for h in args.hidden.split(",")])
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    micro = args.batch_size // world + (1 if rank < args.batch_size % world else 0)
    x = torch.randn(micro, 1, 28, 28)
    y = torch.randint(0, 10, (micro,))

    def step():
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(ddp(x), y, reduction="sum") / args.batch_size
        loss.backward()
        opt.step()
        return (time.perf_counter() - t0) * 1e3

    def measure(sync):
        times = []
        for i in range(args.warmup + args.steps):
            dist.barrier()
            if sync:
                t = step()
            else:
                with ddp.no_sync():
                    t = step()
            if i >= args.warmup:
                times.append(t)
        return statistics.median(times)

    with_comm = measure(True)
    compute_only = measure(False)
    if rank == 0:
        results.put((with_comm, compute_only))
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["lenet5", "mlp"], default="lenet5")
    p.add_argument("--hidden", default="4096,4096,1024")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--port", type=int, default=29517)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.spawn(worker, args=(args.ranks, args, args.port, results), nprocs=args.ranks, join=True)
    step_ms, compute_ms = results.get()
    exposed = max(step_ms - compute_ms, 0.0)
    print(f"ddp-gloo model={args.model} B={args.batch_size} ranks={args.ranks} "
          f"threads={args.threads} bucket_cap_mb={args.bucket_cap_mb}: median step {step_ms:.3f} ms, "
          f"no_sync step {compute_ms:.3f} ms, exposed comm {exposed:.3f} ms "
          f"({100 * exposed / step_ms:.1f}% of step)")


if __name__ == "__main__":
    main()
