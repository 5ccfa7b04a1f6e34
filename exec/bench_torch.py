#!/usr/bin/python3
"""The PyTorch peer of dtexec for `make bench`: trains the same network as models/<name>.yaml
(mlp-fmnist, cnn21k, cnn690k) with Adam and cross-entropy on data held in memory, and prints
one line of key=value figures:

  model=cnn690k batch=128 threads=1 ranks=1 params=690590 iters=40 samples_s=... median_s=...
  mean_samples_s=... peak_rss_mb=... data=fashion-mnist

samples_s is the global batch over the median iteration (the median is what a shared machine
gives reliably; mean_samples_s is the whole timed window). peak_rss_mb is getrusage's maximum
resident set (the largest over ranks). With --ranks 2 the ranks are processes joined by
torch.distributed (gloo on localhost) and DistributedDataParallel, each with the batch given
(weak scaling, as dtexec --batch) and --threads threads.

Usage: bench_torch.py --model NAME [--batch N] [--threads T] [--ranks R] [--iters N]
                      [--warmup N] [--data DIR] [--seed N]
Run it with Debian's /usr/bin/python3 (python3-torch 1.13).
"""
import argparse
import gzip
import os
import resource
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
# Parameter counts of the model zoo (models/*.yaml headers; dtsim --summary prints them).
EXPECTED_PARAMS = {"mlp-fmnist": 101770, "cnn21k": 21840, "cnn690k": 690590}


def build(name):
    """The network of models/<name>.yaml, layer for layer. The last softmax of the YAML is
    folded into the loss (nn.CrossEntropyLoss takes logits), as dtexec fuses it with the
    cross-entropy."""
    if name == "mlp-fmnist":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 128), nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(128, 10))
    if name == "cnn21k":
        # models/cnn21k.yaml: conv2_drop is an element-wise dropout there, so here too.
        return nn.Sequential(
            nn.Conv2d(1, 10, 5), nn.MaxPool2d(2), nn.ReLU(),
            nn.Conv2d(10, 20, 5), nn.Dropout(0.5), nn.MaxPool2d(2), nn.ReLU(),
            nn.Flatten(),
            nn.Linear(320, 50), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(50, 10))
    if name == "cnn690k":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 128, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(128, 256, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(0.5),
            nn.Linear(256, 1000), nn.ReLU(),
            nn.Linear(1000, 100), nn.ReLU(),
            nn.Linear(100, 10))
    raise SystemExit("bench_torch.py: unknown model '%s' (mlp-fmnist, cnn21k, cnn690k)" % name)


def read_idx(path):
    """An IDX file (gzip or plain) as a numpy uint8 array of its dimensions."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError("%s: not an unsigned-byte IDX file" % path)
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(dims)


def load_data(data_dir, seed):
    """Fashion-MNIST's training set as (N,1,28,28) floats in [0,1] and int64 labels; without
    the files, 60000 synthetic samples of the same shape."""
    for suffix in (".gz", ""):
        xi = os.path.join(data_dir, "train-images-idx3-ubyte" + suffix)
        yi = os.path.join(data_dir, "train-labels-idx1-ubyte" + suffix)
        if os.path.exists(xi) and os.path.exists(yi):
            # one float copy of the pixels (the peak memory column compares data held once)
            x = torch.from_numpy(read_idx(xi).reshape(-1, 1, 28, 28).copy()).float().div_(255.0)
            y = torch.from_numpy(read_idx(yi).astype(np.int64))
            return x, y, "fashion-mnist"
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(60000, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (60000,), generator=g)
    return x, y, "synthetic"


def train(rank, args, result_queue=None):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    distributed = args.ranks > 1
    if distributed:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    x, y, what = load_data(args.data, args.seed)
    model = build(args.model)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if n_params != EXPECTED_PARAMS[args.model]:
        raise SystemExit("bench_torch.py: %s has %d parameters, the YAML %d"
                         % (args.model, n_params, EXPECTED_PARAMS[args.model]))
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    # one permutation shared by the ranks; rank r takes its part of each global batch
    g = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(x.shape[0], generator=g)
    B, R = args.batch, args.ranks
    per_epoch = x.shape[0] // (B * R)
    times = []
    total = args.warmup + args.iters
    for it in range(total):
        k = it % per_epoch
        idx = order[(k * R + rank) * B:(k * R + rank + 1) * B]
        t0 = time.perf_counter()
        xb, yb = x[idx], y[idx]   # the batch is gathered in the timed step, as dtexec's LOAD
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if it >= args.warmup:
            times.append(t1 - t0)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    med, tot = statistics.median(times), sum(times)
    if distributed:
        # the slowest rank's figures (the step ends together on every rank anyway)
        t = torch.tensor([med, tot, rss_mb], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        med, tot, rss_mb = t.tolist()
        dist.destroy_process_group()
    if rank == 0:
        print("model=%s batch=%d threads=%d ranks=%d params=%d iters=%d samples_s=%.1f "
              "median_s=%.6f mean_samples_s=%.1f peak_rss_mb=%.1f data=%s loss=%.4f torch=%s"
              % (args.model, B, args.threads, R, n_params, args.iters, B * R / med, med,
                 B * R * args.iters / tot, rss_mb, what, float(loss), torch.__version__))
        sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=29511)
    args = p.parse_args()
    if args.model not in EXPECTED_PARAMS:
        build(args.model)
    if args.ranks > 1:
        import torch.multiprocessing as mp
        os.environ["MASTER_PORT"] = str(args.port)
        mp.spawn(train, args=(args,), nprocs=args.ranks, join=True)
    else:
        train(0, args)


if __name__ == "__main__":
    main()
