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

The driver's own gradient hooks, registered before the learner's, note when each gradient is
ready: when the first all-reduce of backward is launched, at most one bucket's bytes (bucket_bytes
plus one parameter) may be ready; launching every bucket from the last gradient's hook passed
the byte counts below (a red-team pass).

Overlap is judged by bytes, not by calls: every collective of backward and of wait() is counted
whatever route starts it (h.count_collectives), with its bytes as launched. At least all the
gradient bytes but one bucket (bucket_bytes plus one parameter) must be all-reduced during
backward, wait() may launch at most one bucket's bytes, and no collective but all-reduce may
run at all. Counting calls alone let a red-team variant pass with one all-reduce of a single
element launched from a hook and every gradient reduced in one blocking call in wait(): 1 call
of 2 during backward looked like "all but the last bucket" (variant decoy-hook).

Backward must not wait: dist.all_reduce without async_op, Work.wait / synchronize /
block_current_stream, a future's wait() (work.get_future().wait(), torch.futures.wait_all) and
a functional collective's wait are counted during backward. The late step also times rank
0's backward on the host: the other ranks start LATE_S late, so a backward lasting half of that
means a hook waited for them, by whatever means (a busy loop on work.is_completed() included:
variant spin-in-hook). With gloo (CPU) every wait blocks the host; with NCCL handle.wait() only
makes the stream wait, which the named waits above show instead.

Performance (GPU): time of one training step (forward, backward, wait, SGD step) against
torch's DistributedDataParallel on the same model and batch. Then "after-timing": new weights
and a new batch in the timed model and tensors, one more backward and wait(), the gradients
checked, so a GradientSync that stops reducing after its first steps (when timed) fails.

The weights every rank starts from are rank 0's inputs, broadcast by rank 0 (as DDP does when
it wraps a model); each rank's slice of the batch is its own input. The checks are made by each
rank's verifier, a second process that runs this file without the learner's module
(docs/protocol.md §4, "The verifier"): the rank hands over its parameters after training (and,
after timing, its gradients) and what it counted of the all-reduces; the verifier trains the
single-process reference on the whole batch, made from every rank's inputs, which the rank
itself cannot make.
"""
import copy
import sys
import time

import torch
import torch.distributed as dist
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
# Every other way to wait for a collective from Python: a future's wait() (also what
# torch.futures.wait_all and torch.futures.Future.wait end in), a work's synchronize and
# block_current_stream.
WAITS = [WAIT, "torch._C.Future.wait", "torch.distributed.Work.synchronize",
         "torch.distributed.Work.block_current_stream"]
COUNTED = [PUBLIC, LAUNCH] + WAITS
HARMLESS = ("barrier", "wait")  # collectives that carry no gradients


def make_mlp(width, depth, it, reference=False):
    """The model every rank starts from: its weights are rank 0's inputs of iteration it, made by
    rank 0 and broadcast to the others in the ranks (DDP does the same when it wraps a model).
    reference=True (behind h.verifies) makes the same model from the seed, with no collective:
    the reference a verifier trains, or a rank run without one. Weights uniform in about
    +-1/sqrt(width), biases in +-0.1."""
    layers = []
    for i in range(depth):
        layers.append(nn.Linear(width, width, device=h.device))
        if i < depth - 1:
            layers.append(nn.Tanh())
    model = nn.Sequential(*layers)
    params = list(model.parameters())
    shared = h.computes and not reference
    if shared and h.rank != 0:
        flat = torch.empty(sum(p.numel() for p in params), device=h.device)
    else:
        parts = []
        for k, p in enumerate(params):
            scale = 64 * width**0.5 if p.dim() == 2 else 640
            parts.append(h.exact(p.numel(), rank=0, iter=it, salt=k) / scale)
        flat = torch.cat(parts)
    if shared:
        dist.broadcast(flat, 0)
    with torch.no_grad():
        off = 0
        for p in params:
            p.copy_(flat[off:off + p.numel()].view_as(p))
            off += p.numel()
    return model


def batch_of(r, width, rows, it, salt=0):
    """Rank r's slice of a batch (inputs and targets in [-1, 1]): rank r's own inputs."""
    x = h.exact((rows, width), rank=r, iter=it, salt=100 + 2 * salt) / 64
    y = h.exact((rows, width), rank=r, iter=it, salt=101 + 2 * salt) / 64
    return x, y


def whole_batch(width, rows, it, salt=0):
    """The batch of every rank, rank 0's rows first (the verifier's)."""
    parts = [batch_of(r, width, rows, it, salt) for r in range(h.world)]
    return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])


def reduced_bytes(call):
    """Bytes carried by one ProcessGroup.allreduce call (args: group, tensors, options)."""
    ts = call.args[1] if len(call.args) > 1 else call.kwargs.get("tensors", [])
    if isinstance(ts, torch.Tensor):
        ts = [ts]
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


def flat_grads(model):
    """Every p.grad, flattened into one tensor (NaN for a parameter without one)."""
    return torch.cat([(p.grad if p.grad is not None else torch.full_like(p, float("nan")))
                      .detach().reshape(-1) for p in model.parameters()])


AFTER_TIMING = ("after the timed calls, a call with new data in the same buffers gave a wrong "
                "result: every call must do the whole work, repeated calls with the same "
                "buffers included")


def after_timing(name, pi, width, model=None, sync=None, x=None, y=None):
    """New weights and a new batch in the timed model and tensors, one more backward and wait()
    as the timed steps made them (in the rank), and every p.grad compared with the mean over
    ranks of the same backward, which the verifier runs for every rank's slice of the batch."""
    got = None
    if h.computes:
        fresh = make_mlp(width, PERF_DEPTH, 200 + pi)
        with torch.no_grad():
            for p, q in zip(model.parameters(), fresh.parameters()):
                p.copy_(q)
            x2, y2 = batch_of(h.rank, width, x.shape[0], 200 + pi)
            x.copy_(x2)
            y.copy_(y2)
        del fresh, x2, y2
        with h.forbid():
            loss_fn(model(x), y).backward()
            sync.wait()
        got = mgpu_harness.Unreadable.reading(lambda: flat_grads(model), "gradients")
        for p in model.parameters():
            p.grad = None
    got = h.hand_over(f"after-timing/{name}/grads", got)
    if not h.verifies:
        return
    fresh = make_mlp(width, PERF_DEPTH, 200 + pi, reference=True)
    for r in range(h.world):
        xr, yr = batch_of(r, width, PERF_ROWS_PER_RANK, 200 + pi)
        loss_fn(fresh(xr), yr).backward()  # accumulates: the sum over ranks
        del xr, yr
    want = torch.cat([q.grad.reshape(-1) for q in fresh.parameters()]).div_(h.world)
    scale = want.abs().max().item()
    h.check_equal("after-timing", got, want, tol=1e-5 * scale, rtol=1e-5,
                  msg=f"performance case {name}: {AFTER_TIMING} (the gradients after "
                  "backward and wait() are not the mean over ranks)")


def counted(names):
    """The names of COUNTED that exist in this torch (count_calls refuses the others)."""
    out = []
    for n in names:
        try:
            with h.count_calls([n]):
                pass
            out.append(n)
        except ValueError:
            pass
    return out


h = mgpu_harness.init(default_cases={"small": 32, "odd": 33})
learner = h.import_learner("overlap")  # None in the verifier
if h.computes:
    h.init_process_group()
    COUNTED = counted(COUNTED)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
loss_fn = nn.MSELoss()

# The exercise is split (verifier: true, docs/protocol.md §4): this rank trains with the
# learner's GradientSync on its own slice of the batch and hands over its parameters and what it
# counted of the all-reduces at each step; its verifier, which never loads the learner's module
# and alone knows the other ranks' slices, trains the reference and records the cases.

for ci, (name, width) in enumerate(h.cases.items()):
    model = make_mlp(width, DEPTH, ci)
    nparams = sum(p.numel() for p in model.parameters())
    bucket = max(1024, nparams * 4 // 3)  # about three buckets
    limit = bucket + max(p.numel() * p.element_size() for p in model.parameters())
    total = sum(p.numel() * p.element_size() for p in model.parameters())  # gradient bytes
    got = seen = None
    if h.computes:
        # The driver's own hooks, registered before the learner's (hooks of a parameter run in
        # the order they were registered): when each gradient became ready, and its bytes.
        ready = []
        for prm in model.parameters():
            prm.register_post_accumulate_grad_hook(
                lambda q: ready.append((time.perf_counter(), q.numel() * q.element_size())))
        with h.forbid():
            sync = learner.GradientSync(model, bucket)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        seen = []  # per step, what the driver counted of the all-reduces
        for step in range(STEPS):
            x, y = batch_of(h.rank, width, ROWS_PER_RANK, ci, step)
            if step == LATE_STEP and h.rank != 0:
                # The other ranks start backward late, so rank 0's all-reduces cannot finish
                # before its wait() runs: a wait() that reads the buffers without waiting on the
                # handles reads unreduced gradients.
                time.sleep(LATE_S)
            timed = step == LATE_STEP and h.rank == 0
            ready.clear()
            t0 = time.perf_counter()
            with h.count_calls(COUNTED) as during, h.count_collectives() as c_during, \
                    h.forbid():
                loss_fn(model(x), y).backward()
            # Gradient bytes ready when the first all-reduce of backward was launched.
            first = min((c.t for c in c_during if c.kind == "all_reduce"), default=None)
            ready_at_first = None if first is None else sum(b for t, b in ready if t <= first)
            # Rank 0's backward on the late step, host time: the others start LATE_S late.
            stall = time.perf_counter() - t0 if timed else None
            with h.count_calls(COUNTED) as after, h.count_collectives() as c_after, h.forbid():
                sync.wait()
            opt.step()
            opt.zero_grad(set_to_none=True)
            # Every dist.all_reduce goes through ProcessGroup.allreduce, whatever name the
            # learner's code reached it by, so the launches are counted there.
            launched = [c for c in during if c.name == LAUNCH]
            others = {}
            for c in c_during + c_after:
                if c.kind != "all_reduce" and c.kind not in HARMLESS:
                    others[c.kind] = others.get(c.kind, 0) + 1
            seen.append({
                "during": len(launched),
                "total": len(launched) + sum(1 for c in after if c.name == LAUNCH),
                "big": max((reduced_bytes(c) for c in launched), default=0),
                "blocking": sum(1 for c in during
                                if c.name == PUBLIC and not c.arg(4, "async_op", False)),
                "waited": sum(1 for c in during if c.name in WAITS)
                + sum(1 for c in c_during if c.kind == "wait"),
                # Bytes, every route: all-reduced during backward; launched by wait().
                "during_bytes": sum(c.bytes for c in c_during if c.kind == "all_reduce"),
                "after_bytes": sum(c.bytes for c in c_after if c.kind not in HARMLESS),
                "others": others,
                "stall": stall,
                "ready_at_first": ready_at_first,
            })
        got = mgpu_harness.Unreadable.reading(
            lambda: torch.cat([p.detach().reshape(-1) for p in model.parameters()]), "parameters")
    got = h.hand_over(f"{name}/params", got)
    seen = h.hand_over(f"{name}/allreduce-counts", seen)
    if not h.verifies:
        continue
    problems = []
    for step, s in enumerate(seen):
        if problems:
            break
        if h.world > 1 and s["total"] == 0:
            problems.append(f"step {step}: the driver saw no all-reduce at all: reduce each "
                            "bucket with dist.all_reduce(flat, async_op=True)")
        elif s["total"] > 1 and s["during"] < s["total"] - 1:
            problems.append(f"step {step}: only {s['during']} of {s['total']} all_reduce calls "
                            "were launched during backward: launch each bucket from the "
                            "gradient hooks as soon as its last gradient is ready")
        elif s["total"] >= 1 and s["during"] == 0:
            problems.append(f"step {step}: no all_reduce was launched during backward")
        elif s["blocking"] or s["waited"]:
            problems.append(f"step {step}: backward waited for an all-reduce (a dist.all_reduce "
                            "without async_op=True, or handle.wait() inside a hook, or a "
                            "future's wait()): nothing overlaps; keep the handles and wait on "
                            "them in wait()")
        elif s["big"] > limit:
            problems.append(f"step {step}: one all-reduce carried {s['big']} bytes, more than "
                            f"bucket_bytes ({bucket}) plus one parameter: cut the parameters "
                            "into buckets of about bucket_bytes so that the first buckets "
                            "start while backward still runs")
        elif s["others"]:
            what = ", ".join(f"{k} x{v}" for k, v in sorted(s["others"].items()))
            problems.append(f"step {step}: besides all_reduce your code launched other "
                            f"collectives ({what}): the gradients must travel in the buckets' "
                            "all_reduce calls and nothing else")
        elif h.world > 1 and s["during_bytes"] < total - limit:
            problems.append(f"step {step}: only {s['during_bytes']} of the {total} gradient "
                            "bytes were all-reduced during backward (all but at most one "
                            f"bucket, {limit} bytes, must be): launch each bucket's all_reduce "
                            "from the gradient hooks, on the bucket's gradients, as soon as "
                            "its last gradient is ready")
        elif h.world > 1 and (s.get("ready_at_first") or 0) > limit:
            problems.append(f"step {step}: the first all_reduce of backward was launched when "
                            f"{s['ready_at_first']} of the {total} gradient bytes were ready, "
                            f"more than one bucket ({limit} bytes): nothing overlapped the "
                            "rest of backward. Launch each bucket from the gradient hooks as "
                            "soon as its last gradient is ready, not all of them at the end")
        elif s["after_bytes"] > limit:
            problems.append(f"step {step}: wait() launched collectives carrying "
                            f"{s['after_bytes']} bytes, more than one bucket ({limit} bytes): "
                            "the gradients must be reduced by the all-reduces launched during "
                            "backward; wait() only waits on them")
        elif s["stall"] is not None and s["stall"] > LATE_S / 2:
            problems.append(f"step {step}: rank 0's backward took {s['stall']:.2f} s while the "
                            f"other ranks started {LATE_S} s late: a hook waited for them "
                            "(handle.wait(), a future's wait(), a loop on is_completed(), ...): "
                            "nothing overlaps; keep the handles and wait on them in wait()")
    # The reference: the same model trained in one process on the whole batch (a model of its
    # own: run without a verifier, `model` is the one the learner's hooks trained).
    ref = make_mlp(width, DEPTH, ci, reference=True)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(STEPS):
        x, y = whole_batch(width, ROWS_PER_RANK, ci, step)
        loss_fn(ref(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=True)
    want = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
    result = h.compare(got, want, tol=1e-6, rtol=1e-5)
    if not result.ok():
        result.msg_parts.append(f"after {STEPS} SGD steps the parameters differ from training "
                                "on the whole batch in one process: are the gradients the "
                                "mean over ranks, all of them written back into p.grad, and "
                                "does wait() wait on every handle before reading its buffer?")
    if problems:
        result.forced = True  # the driver's finding, whatever the comparison said
        result.msg_parts += problems
    h.record(name, result)

if h.timing:
    for pi, (name, width) in enumerate(h.perf_cases.items()):
        if h.computes:
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = make_mlp(width, PERF_DEPTH, 100 + pi)
            base = DDP(copy.deepcopy(model), device_ids=[h.device.index] if h.on_gpu else None,
                       bucket_cap_mb=PERF_BUCKET / 2**20)
            with h.forbid():
                sync = learner.GradientSync(model, PERF_BUCKET)
            opt = torch.optim.SGD(model.parameters(), lr=1e-4)
            base_opt = torch.optim.SGD(base.parameters(), lr=1e-4)
            x, y = batch_of(h.rank, width, PERF_ROWS_PER_RANK, 100 + pi)

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
            del base, base_opt
            after_timing(name, pi, width, model, sync, x, y)
        else:
            after_timing(name, pi, width)
elif h.computes:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
