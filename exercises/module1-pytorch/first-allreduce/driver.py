"""Driver of module1/first-allreduce (course-owned; the learner edits first_allreduce.py).

Checks that setup() creates the default process group the way this rank needs it (right rank,
world size and backend; on a GPU, bound to this rank's device with device_id), then that
average() leaves, in place, the mean over all ranks of every element.

Inputs are the world size times numbers in steps of 0.5 (integers on every rank but rank 0,
which adds 0.5), so every rank's input, its share (input / world) and the mean are exact in
float32 whatever the order of the additions and whether the division comes first or last: the
check uses tolerance 0. The mean is never a whole number, so floor division (t //= n) fails.

The tensor given to average() is a view into a larger buffer: the driver checks the buffer's
memory, so replacing the tensor's storage (t.data = ..., t.set_(...)) instead of writing into
it fails as well.
"""
import sys

import torch
import torch.distributed as dist

import mgpu_harness

h = mgpu_harness.init(default_cases={"setup": 1, "one": 1, "odd": 100003})
learner = h.import_learner("first_allreduce")

# ---- setup ----------------------------------------------------------------------------------
with h.forbid():
    learner.setup(h.rank, h.world, h.backend, h.device)
problems = []
if not dist.is_initialized():
    problems.append("setup() returned but the default process group is not initialized: "
                    "call dist.init_process_group(...) in setup()")
    h.init_process_group()  # so that average() can still be checked
else:
    if dist.get_rank() != h.rank:
        problems.append(f"dist.get_rank() is {dist.get_rank()}, but this rank is {h.rank}: "
                        "pass rank=rank to init_process_group")
    if dist.get_world_size() != h.world:
        problems.append(f"dist.get_world_size() is {dist.get_world_size()}, but the job has "
                        f"{h.world} ranks: pass world_size=world")
    if dist.get_backend() != h.backend:
        problems.append(f"the backend is {dist.get_backend()!r}, expected {h.backend!r}: "
                        "use the backend you were given")
    if h.on_gpu:
        bound = dist.distributed_c10d._get_default_group().bound_device_id
        if bound != h.device:
            problems.append(f"the process group is not bound to this rank's GPU {h.device} "
                            f"(bound_device_id is {bound}): pass device_id=device to "
                            "init_process_group, so NCCL knows the GPU of each rank up front")
h.record_case("setup", not problems, n=1, msg="; ".join(problems) or None)

# ---- average --------------------------------------------------------------------------------
for name, n in h.cases.items():
    if name == "setup":
        continue
    result = None  # the first failing iteration's, else the last one's
    for it in range(2):
        half = 0.5 if h.rank == 0 else 0.0
        x = (h.exact(n, iter=it) + half) * h.world
        want = h.exact_sum(n, iter=it) + 0.5  # = sum over ranks of x, divided by the world size
        total = want * h.world                # the sum over ranks, exact
        # t is a view into the middle of a larger buffer: the result must land in t's memory.
        buf = torch.full((n + 2,), float("nan"), device=h.device)
        t = buf[1:n + 1]
        t.copy_(x)
        mem = buf[1:n + 1]
        with h.forbid():
            ret = learner.average(t)
        r = h.compare(mem, want)
        if result is None or result.ok():
            result = r
        if r.ok():
            continue
        hint = f"{h.world} ranks, iteration {it}"
        if t.data_ptr() != mem.data_ptr() and t.shape == want.shape and h.compare(t, want).ok():
            hint += ("; the tensor object holds the mean, but in new memory: t.data = ... or "
                     "t.set_(...) swaps its storage, so the memory the caller gave you (a "
                     "gradient bucket, a parameter's .grad) never sees the result: write into "
                     "it, e.g. t.div_(n)")
        elif isinstance(ret, torch.Tensor) and ret.data_ptr() != mem.data_ptr() \
                and ret.shape == want.shape and h.compare(ret, want).ok():
            hint += ("; average() returned the right mean in a new tensor, but the tensor it "
                     "was given does not hold it: work in place (all_reduce writes into its "
                     "argument; use t.div_(n) rather than t = t / n)")
        elif h.world > 1 and torch.equal(mem, total):
            hint += (f"; every element is {h.world}x the mean: that is the sum over ranks, "
                     "divide it by the world size")
        elif torch.equal(mem, torch.floor(want)):
            hint += ("; every element is the mean rounded down: // (floor_divide) rounds; "
                     "use true division, t.div_(n)")
        elif torch.equal(mem, x):
            hint += "; the tensor is unchanged: nothing was reduced across ranks"
        else:
            k = next((k for k in range(1, 9) if k != h.world
                      and torch.equal(mem, total / k)), None)
            if k is not None:
                hint += (f"; every element is the sum over ranks divided by {k}, but there "
                         f"are {h.world} ranks: divide by dist.get_world_size()")
        r.msg_parts.append(hint)
    h.record(name, result)

sys.exit(h.finish())
