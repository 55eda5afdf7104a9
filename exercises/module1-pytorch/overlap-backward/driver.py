"""Driver of module1/overlap-backward (course-owned; the learner edits overlap.py).

GradientSync(model, bucket_bytes) registers gradient hooks that all-reduce buckets of
gradients asynchronously while backward is still running; wait() finishes them and leaves the
averaged gradients in p.grad. The driver trains a deterministic MLP (a case's n is its width;
DEPTH layers) with SGD for STEPS steps, each rank on its own slice of a global batch, and
compares the parameters with single-process training on the full batch (float32, relative
tolerance 1e-5). It also checks that the all-reduces were launched during backward
(async_op=True) rather than all at the end, that no handle is waited on inside backward, and
that no all-reduce is much bigger than bucket_bytes. On step LATE_STEP the ranks other than 0
start backward LATE_S late, so a wait() that does not wait on its handles reads unreduced data.

Performance (GPU): time of one training step (forward, backward, wait, SGD step) against
torch's DistributedDataParallel on the same model and batch. Then "after-timing": new weights
and a new batch in the timed model and tensors, one more backward and wait(), the gradients
checked, so a GradientSync that stops reducing after its first steps (when timed) fails.
"""
import copy
import sys
import time

import torch
import torch.nn as nn

import mgpu_harness

DEPTH = 4
STEPS = 3
ROWS_PER_RANK = 8
PERF_DEPTH = 8
PERF_ROWS_PER_RANK = 256
PERF_BUCKET = 25 * 2**20
LATE_STEP = 1    # the step on which ranks other than 0 start backward late
LATE_S = 0.3
PUBLIC = "torch.distributed.all_reduce"
LAUNCH = "ProcessGroup.allreduce"
WAIT = "torch.distributed.Work.wait"
COUNTED = [PUBLIC, LAUNCH, WAIT]


def make_mlp(width, depth, seed, device):
    g = torch.Generator().manual_seed(seed)
    layers = []
    for i in range(depth):
        lin = nn.Linear(width, width)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(width, width, generator=g) / width**0.5)
            lin.bias.copy_(torch.randn(width, generator=g) * 0.1)
        layers += [lin, nn.Tanh()] if i < depth - 1 else [lin]
    return nn.Sequential(*layers).to(device)


def batch(width, rows, seed, step, device):
    g = torch.Generator().manual_seed(seed * 1000003 + step)
    x = torch.randn(rows, width, generator=g)
    y = torch.randn(rows, width, generator=g)
    return x.to(device), y.to(device)


def reduced_bytes(call):
    """Bytes carried by one ProcessGroup.allreduce call (args: group, tensors, options)."""
    ts = call.args[1] if len(call.args) > 1 else call.kwargs.get("tensors", [])
    if isinstance(ts, torch.Tensor):
        ts = [ts]
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


AFTER_TIMING = ("after the timed calls, a call with new data in the same buffers gave a wrong "
                "result: every call must do the whole work, repeated calls with the same "
                "buffers included")


def after_timing(name, model, sync, x, y, width):
    """New weights and a new batch in the timed model and tensors, one more backward and wait()
    as the timed steps made them, and every p.grad compared with the mean over ranks of the
    same backward run by the driver on a copy of the model (same local gradients, summed by
    one all_reduce per tensor, so only the order of the sum over ranks may differ)."""
    fresh = make_mlp(width, PERF_DEPTH, seed + 1, h.device)
    with torch.no_grad():
        for p, q in zip(model.parameters(), fresh.parameters()):
            p.copy_(q)
        x2, y2 = batch(width, x.shape[0], seed + h.rank, 1, h.device)
        x.copy_(x2)
        y.copy_(y2)
    with h.forbid():
        loss_fn(model(x), y).backward()
        sync.wait()
    loss_fn(fresh(x), y).backward()
    all_reduce = h.real("torch.distributed.all_reduce")
    for q in fresh.parameters():
        all_reduce(q.grad)
        q.grad.div_(h.world)
    got = torch.cat([(p.grad if p.grad is not None else torch.full_like(p, float("nan")))
                     .detach().reshape(-1) for p in model.parameters()])
    want = torch.cat([q.grad.reshape(-1) for q in fresh.parameters()])
    scale = want.abs().max().item()
    h.check_equal("after-timing", got, want, tol=1e-5 * scale, rtol=1e-5,
                  msg=f"performance case {name}: {AFTER_TIMING} (the gradients after "
                  "backward and wait() are not the mean over ranks)")
    for p in model.parameters():
        p.grad = None


h = mgpu_harness.init(default_cases={"small": 32, "odd": 33})
learner = h.import_learner("overlap")
h.init_process_group()
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
seed = h.seed % 2**31
loss_fn = nn.MSELoss()

for name, width in h.cases.items():
    model = make_mlp(width, DEPTH, seed, h.device)
    ref = copy.deepcopy(model)
    nparams = sum(p.numel() for p in model.parameters())
    bucket = max(1024, nparams * 4 // 3)  # about three buckets
    with h.forbid():
        sync = learner.GradientSync(model, bucket)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    rows = ROWS_PER_RANK * h.world
    problems = []
    limit = bucket + max(p.numel() * p.element_size() for p in model.parameters())
    for step in range(STEPS):
        x, y = batch(width, rows, seed, step, h.device)
        lo, hi = h.rank * ROWS_PER_RANK, (h.rank + 1) * ROWS_PER_RANK
        if step == LATE_STEP and h.rank != 0:
            # The other ranks start backward late, so rank 0's all-reduces cannot finish before
            # its wait() runs: a wait() that reads the buffers without waiting on the handles
            # reads unreduced gradients.
            time.sleep(LATE_S)
        with h.count_calls(COUNTED) as during, h.forbid():
            loss_fn(model(x[lo:hi]), y[lo:hi]).backward()
        with h.count_calls(COUNTED) as after, h.forbid():
            sync.wait()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_fn(ref(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=True)
        # Every dist.all_reduce goes through ProcessGroup.allreduce, whatever name the learner's
        # code reached it by, so the launches are counted there.
        launched = [c for c in during if c.name == LAUNCH]
        n_during = len(launched)
        total = n_during + sum(1 for c in after if c.name == LAUNCH)
        big = max((reduced_bytes(c) for c in launched), default=0)
        blocking = [c for c in during if c.name == PUBLIC and not c.arg(4, "async_op", False)]
        waited = [c for c in during if c.name == WAIT]
        if problems:
            pass
        elif h.world > 1 and total == 0:
            problems.append(f"step {step}: the driver saw no all-reduce at all: reduce each "
                            "bucket with dist.all_reduce(flat, async_op=True)")
        elif total > 1 and n_during < total - 1:
            problems.append(f"step {step}: only {n_during} of {total} all_reduce calls were "
                            "launched during backward: launch each bucket from the gradient "
                            "hooks as soon as its last gradient is ready")
        elif total >= 1 and n_during == 0:
            problems.append(f"step {step}: no all_reduce was launched during backward")
        elif blocking or waited:
            problems.append(f"step {step}: backward waited for an all-reduce (a dist.all_reduce "
                            "without async_op=True, or handle.wait() inside a hook): nothing "
                            "overlaps; keep the handles and wait on them in wait()")
        elif big > limit:
            problems.append(f"step {step}: one all-reduce carried {big} bytes, more than "
                            f"bucket_bytes ({bucket}) plus one parameter: cut the parameters "
                            "into buckets of about bucket_bytes so that the first buckets "
                            "start while backward still runs")
    got = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    want = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
    result = h.compare(got, want, tol=1e-6, rtol=1e-5)
    if not result.ok():
        result.msg_parts.append(f"after {STEPS} SGD steps the parameters differ from training "
                                "on the whole batch in one process: are the gradients the "
                                "mean over ranks, all of them written back into p.grad, and "
                                "does wait() wait on every handle before reading its buffer?")
    if problems:
        result.bad = max(result.bad, 1)
        result.msg_parts += problems
    h.record(name, result)

if h.timing:
    from torch.nn.parallel import DistributedDataParallel as DDP

    for name, width in h.perf_cases.items():
        model = make_mlp(width, PERF_DEPTH, seed, h.device)
        base = DDP(copy.deepcopy(model), device_ids=[h.device.index] if h.on_gpu else None,
                   bucket_cap_mb=PERF_BUCKET / 2**20)
        with h.forbid():
            sync = learner.GradientSync(model, PERF_BUCKET)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        base_opt = torch.optim.SGD(base.parameters(), lr=1e-4)
        x, y = batch(width, PERF_ROWS_PER_RANK, seed + h.rank, 0, h.device)

        def yours(i):
            loss_fn(model(x), y).backward()
            sync.wait()
            opt.step()
            opt.zero_grad(set_to_none=True)

        def baseline(i):
            loss_fn(base(x), y).backward()
            base_opt.step()
            base_opt.zero_grad(set_to_none=True)

        nbytes = sum(p.numel() * 4 for p in model.parameters())
        h.time_pair(name, bytes=nbytes, factor=1, metric="time", yours=yours,
                    baseline=baseline, iters=1)
        after_timing(name, model, sync, x, y, width)
else:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
