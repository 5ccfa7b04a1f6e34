#!/usr/bin/python3
"""The PyTorch peer of dtexec for `make bench`: trains the same network as models/<name>.yaml
(mlp-fmnist, cnn21k, cnn690k) with Adam and cross-entropy on data held in memory, and prints
one line of key=value figures (cpus= the CPUs each rank may run on, ranks parted by '/'):

  model=cnn690k batch=128 threads=1 ranks=1 params=690590 iters=40 samples_s=... median_s=...
  mean_samples_s=... peak_rss_mb=... data=fashion-mnist ... format=channels_last
  grads=none malloc=tcmalloc cpus=0 blas=OpenBLAS_0.3.21_... blas_threads=1 torch=...

Timing is dtexec's: each iteration (the batch gathered from memory, forward, backward, Adam
step) is timed on its own and samples_s is the global batch over the median iteration (the
median is what a shared machine gives reliably; mean_samples_s is the whole timed window).
--warmup untimed iterations come first. peak_rss_mb is getrusage's maximum resident set (the
largest over ranks). With --ranks 2 the ranks are processes joined by torch.distributed (gloo
on localhost) and DistributedDataParallel, each with the batch given (weak scaling, as dtexec
--batch) and --threads threads.

PyTorch is configured as its performance tuning guide recommends unless told otherwise: the
convolutional models in channels_last (--memory-format contiguous: the default NCHW),
gradients dropped rather than zeroed between steps (--zero-grads: zeroed), and with --bind
each rank pinned to its own block of the CPUs it may use, as dtexec --bind (the launcher sets
OMP_PROC_BIND/OMP_PLACES for the threads inside it and LD_PRELOADs tcmalloc; malloc= says
whether tcmalloc is in the process). blas= is the BLAS library PyTorch calls (its build says
BLAS_INFO=generic: Debian's libblas.so.3, which the alternatives system points at OpenBLAS or
another), by openblas_get_config when it is OpenBLAS.

Usage: bench_torch.py --model NAME [--batch N] [--threads T] [--ranks R] [--iters N]
                      [--warmup N] [--data DIR] [--seed N] [--bind]
                      [--memory-format channels_last|contiguous] [--zero-grads]
Run it with Debian's /usr/bin/python3 (python3-torch 1.13).
"""
import argparse
import ctypes
import gzip
import os
import re
import resource
import statistics
import struct
import sys
import tempfile
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


def pin(rank, ranks):
    """Pins every thread of this process to rank's block of the CPUs it may use, as dtexec
    --bind does (n CPUs over R ranks: n/R each; one each, shared in turn, when fewer), before
    the work starts its threads. Returns the CPUs as a list."""
    allowed = sorted(os.sched_getaffinity(0))
    count = max(1, len(allowed) // ranks)
    first = rank * count % len(allowed)
    mine = set(allowed[first:first + count])
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), mine)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    return sorted(mine)


def loaded_libraries():
    """The paths of the shared objects mapped into this process."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if len(line.split()) >= 6}
    return {p for p in paths if ".so" in os.path.basename(p)}


def blas_in_use(libs):
    """What PyTorch's BLAS is: OpenBLAS's own description when the libblas it links is
    OpenBLAS, else the library's file name; and its thread count (-1 when unknown)."""
    info = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    blas = [p for p in libs if os.path.basename(p).startswith("libblas.so")]
    if not blas:
        return "BLAS_INFO=%s" % (info.group(1) if info else "?"), -1
    lib = ctypes.CDLL(blas[0])
    if not hasattr(lib, "openblas_get_config"):
        return os.path.basename(os.path.dirname(blas[0])) + "/" + os.path.basename(blas[0]), -1
    lib.openblas_get_config.restype = ctypes.c_char_p
    return lib.openblas_get_config().decode().replace(" ", "_"), lib.openblas_get_num_threads()


def train(rank, args):
    cpus = pin(rank, args.ranks) if args.bind else sorted(os.sched_getaffinity(0))
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    distributed = args.ranks > 1
    if distributed:
        import torch.distributed as dist
        # the ranks meet in a file, not on a TCP port another run may hold
        dist.init_process_group("gloo", init_method="file://" + args.store, rank=rank,
                                world_size=args.ranks)
    x, y, what = load_data(args.data, args.seed)
    model = build(args.model)
    # channels_last: the layout PyTorch's tuning guide recommends for convolutions on CPU
    # (oneDNN's own; NCHW costs a reorder on every convolution, forward and backward)
    fmt = torch.channels_last if args.memory_format == "channels_last" else None
    if fmt is not None and any(isinstance(m, nn.Conv2d) for m in model.modules()):
        model = model.to(memory_format=fmt)
    else:
        fmt = None
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
        if it == args.warmup:  # the allocator's page faults in the timed window
            faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        xb, yb = x[idx], y[idx]   # the batch is gathered in the timed step, as dtexec's LOAD
        if fmt is not None:
            xb = xb.contiguous(memory_format=fmt)
        # the guide: gradients set to None rather than zeroed (PyTorch 2's default)
        opt.zero_grad(set_to_none=not args.zero_grads)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if it >= args.warmup:
            times.append(t1 - t0)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    rss_mb, faults = usage.ru_maxrss / 1024.0, (usage.ru_minflt - faults0) / args.iters
    med, tot = statistics.median(times), sum(times)
    cpus_text = ",".join(map(str, cpus))
    if distributed:
        # the slowest rank's figures (the step ends together on every rank anyway)
        t = torch.tensor([med, tot, rss_mb, faults], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        med, tot, rss_mb, faults = t.tolist()
        # every rank's CPUs as a row of 0/1 (all_gather_object can hang gloo's teardown)
        width = torch.tensor([float(max(cpus) + 1)], dtype=torch.float64)
        dist.all_reduce(width, op=dist.ReduceOp.MAX)
        mask = torch.zeros(R, int(width.item()), dtype=torch.float64)
        mask[rank, cpus] = 1
        dist.all_reduce(mask)
        cpus_text = "/".join(",".join(str(c) for c in row.nonzero().flatten().tolist())
                             for row in mask)
        dist.destroy_process_group()
    if rank == 0:
        libs = loaded_libraries()
        blas, blas_threads = blas_in_use(libs)
        malloc = "tcmalloc" if any("tcmalloc" in os.path.basename(p) for p in libs) else "libc"
        print("model=%s batch=%d threads=%d ranks=%d params=%d iters=%d samples_s=%.1f "
              "median_s=%.6f mean_samples_s=%.1f peak_rss_mb=%.1f faults_per_iter=%.0f data=%s "
              "loss=%.4f "
              "format=%s grads=%s malloc=%s cpus=%s omp_proc_bind=%s blas=%s blas_threads=%d "
              "torch=%s"
              % (args.model, B, args.threads, R, n_params, args.iters, B * R / med, med,
                 B * R * args.iters / tot, rss_mb, faults, what, float(loss),
                 "channels_last" if fmt is not None else "contiguous",
                 "zeroed" if args.zero_grads else "none", malloc,
                 cpus_text, os.environ.get("OMP_PROC_BIND", "unset"), blas,
                 blas_threads, torch.__version__))
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
    p.add_argument("--bind", action="store_true",
                   help="pin each rank to its own block of the allowed CPUs (as dtexec --bind)")
    p.add_argument("--memory-format", choices=("channels_last", "contiguous"),
                   default="channels_last", help="of the convolutional models (default %(default)s)")
    p.add_argument("--zero-grads", action="store_true",
                   help="zero the gradients between steps instead of dropping them")
    args = p.parse_args()
    for name in ("batch", "threads", "ranks", "iters", "warmup"):
        if getattr(args, name) < (0 if name == "warmup" else 1):
            p.error("--%s: %d is out of range (at least %d)"
                    % (name, getattr(args, name), 0 if name == "warmup" else 1))
    if args.model not in EXPECTED_PARAMS:
        build(args.model)
    if args.ranks > 1:
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory(prefix="bench_torch.") as d:
            args.store = os.path.join(d, "store")
            mp.spawn(train, args=(args,), nprocs=args.ranks, join=True)
    else:
        train(0, args)


if __name__ == "__main__":
    main()
