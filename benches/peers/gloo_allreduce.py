"""PyTorch gloo peer for allreduce-sweep: torch.distributed.all_reduce f32 SUM, in place,
nccl-tests table, one thread per rank, ranks as processes on this host over loopback TCP.

    python gloo_allreduce.py -n 2 [--max 64M]

Times: max over ranks of each rank's median batch, as allreduce-sweep reports."""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1].upper(), 1)
    return int(s[:-1] if mult > 1 else s) * mult


def rank_main(rank, n, port, max_bytes, budget):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    if rank == 0:
        print(f"# gloo all_reduce float sum, {n} ranks")
        print(f"{'size':>12} {'count':>10} {'type':>6} {'time_us':>10} {'algbw':>8} {'busbw':>8}")
    size = 4096
    while size <= max_bytes:
        count = size // 4
        iters = max(5, min(2000, budget // size))
        x = torch.arange(count, dtype=torch.float32) % 7 + 1
        x *= rank + 1
        dist.all_reduce(x)
        samples = []
        for _ in range(5):
            dist.barrier()
            t = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(x)
            samples.append((time.perf_counter() - t) / iters)
        med = torch.tensor([sorted(samples)[2]], dtype=torch.float64)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        secs = med.item()
        algbw = size / secs / 1e9
        if rank == 0:
            print(f"{size:>12} {count:>10} {'float':>6} {secs * 1e6:>10.1f} {algbw:>8.2f} "
                  f"{algbw * 2 * (n - 1) / n:>8.2f}", flush=True)
        size *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("-n", type=int, default=2)
    p.add_argument("--max", default="64M")
    p.add_argument("--budget", default="256M")
    p.add_argument("--port", type=int, default=29533)
    a = p.parse_args()
    mp.spawn(rank_main, args=(a.n, a.port, parse(a.max), parse(a.budget)), nprocs=a.n)
