#!/usr/bin/env python3
"""GPU peers of `benches/gpu/run.sh`: ResNet-50 (torchvision) on synthetic ImageNet-shaped data
kept on the GPU, as `train --model resnet50` trains it.

  --mode plain      one process, no communication, the whole global batch (the limit)
  --mode ddp-gloo   DistributedDataParallel over gloo, --ranks processes on GPU 0
                    (NCCL refuses two ranks on one GPU)
  --mode ddp-nccl   DistributedDataParallel over NCCL, one rank

Prints one line: mode, ranks, global batch, images/s, median step (ms), exposed communication
(median step minus the median of the same steps under no_sync(), ms) and the GPU memory of
rank 0 after step 2 and at the end (MiB). Not part of the test path.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
import torchvision

POOL = 32


def timed_steps(model, opt, x, y, global_batch, steps, amp, sync_ctx):
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with sync_ctx():
            opt.zero_grad(set_to_none=False)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                loss = F.cross_entropy(model(x), y, reduction="sum") / global_batch
            loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def worker(rank, world, args, port, results):
    torch.cuda.set_device(0)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    if args.mode != "plain":
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        backend = "nccl" if args.mode == "ddp-nccl" else "gloo"
        dist.init_process_group(backend, rank=rank, world_size=world)
    torch.manual_seed(42)
    model = torchvision.models.resnet50().cuda()
    layout = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=layout)
    if args.mode != "plain":
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[0], bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    micro = args.batch_size // world + (1 if rank < args.batch_size % world else 0)
    pool = torch.randn(POOL, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (POOL,), device="cuda")
    rows = torch.arange(micro, device="cuda") % POOL
    x, y = pool[rows].contiguous(memory_format=layout), labels[rows]
    from contextlib import nullcontext
    no_sync = model.no_sync if args.mode != "plain" else nullcontext
    timed_steps(model, opt, x, y, args.batch_size, 2, args.amp, nullcontext)  # warm-up
    mem_step2 = torch.cuda.memory_allocated() / 2**20
    steps = timed_steps(model, opt, x, y, args.batch_size, args.steps, args.amp, nullcontext)
    local = timed_steps(model, opt, x, y, args.batch_size, args.steps, args.amp, no_sync)
    mem_end = torch.cuda.memory_allocated() / 2**20
    if args.mode != "plain":
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        results.put((statistics.median(steps), statistics.median(local), mem_step2, mem_end))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["plain", "ddp-gloo", "ddp-nccl"], required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128, help="global batch")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--amp", action="store_true", help="bf16 autocast")
    ap.add_argument("--bucket-cap-mb", type=float, default=25)
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="cuDNN times each convolution's algorithms and keeps the fastest")
    ap.add_argument("--channels-last", action="store_true",
                    help="model and batches in channels-last (NHWC) memory format")
    args = ap.parse_args()
    world = 1 if args.mode in ("plain", "ddp-nccl") else args.ranks
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=worker, args=(r, world, args, port, results)) for r in range(world)]
    for p in procs:
        p.start()
    step, local, mem2, mem_end = results.get(timeout=900)
    for p in procs:
        p.join()
    exposed = max(step - local, 0.0) if args.mode != "plain" else 0.0
    print(f"peer mode={args.mode}{' amp=bf16' if args.amp else ''}"
          f"{' cudnn-benchmark' if args.cudnn_benchmark else ''}"
          f"{' channels-last' if args.channels_last else ''} ranks={world} "
          f"B={args.batch_size} images/s={args.batch_size / step * 1e3:.1f} "
          f"step_ms={step:.2f} exposed_comm_ms={exposed:.2f} "
          f"mem_step2_mib={mem2:.0f} mem_end_mib={mem_end:.0f}")


if __name__ == "__main__":
    main()
