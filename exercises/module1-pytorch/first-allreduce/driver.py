"""Driver of module1/first-allreduce (course-owned; the learner edits first_allreduce.py).

Checks that setup() creates the default process group the way this rank needs it (right rank,
world size and backend; on a GPU, bound to this rank's device with device_id), then that
average() leaves, in place, the mean over all ranks of every element.

Inputs are the world size times numbers in steps of 1/64 (h.exact(..., fine=True), plus 0.5 on
rank 0), so every rank's input, its share (input / world) and the mean are exact in float32
whatever the order of the additions and whether the division comes first or last: the check
uses tolerance 0. With 13 significant bits they do not fit float16 (an all_reduce in half passed
integer data). The mean is rarely a whole number, so floor division (t //= n) fails.

The tensor given to average() is a view into a larger buffer: the driver checks the buffer's
memory, so replacing the tensor's storage (t.data = ..., t.set_(...)) instead of writing into
it fails as well.

The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier"): the rank hands over the buffer and, for
the messages, what setup() left and what average() returned; the verifier makes the expected
means from every rank's inputs, which the rank itself cannot make.
"""
import sys

import torch
import torch.distributed as dist

import mgpu_harness

h = mgpu_harness.init(default_cases={"setup": 1, "one": 1, "odd": 100003})
learner = h.import_learner("first_allreduce")  # None in the verifier

# The exercise is split (verifier: true, docs/protocol.md §4): this rank computes and hands its
# results over; its verifier, a process that never loads the learner's module and alone knows
# every rank's inputs, makes the expected values and records the cases.

# ---- setup ----------------------------------------------------------------------------------
problems = None
if h.computes:
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
            problems.append(f"dist.get_world_size() is {dist.get_world_size()}, but the job "
                            f"has {h.world} ranks: pass world_size=world")
        if dist.get_backend() != h.backend:
            problems.append(f"the backend is {dist.get_backend()!r}, expected {h.backend!r}: "
                            "use the backend you were given")
        if h.on_gpu:
            bound = dist.distributed_c10d._get_default_group().bound_device_id
            if bound != h.device:
                problems.append(f"the process group is not bound to this rank's GPU "
                                f"{h.device} (bound_device_id is {bound}): pass "
                                "device_id=device to init_process_group, so NCCL knows the "
                                "GPU of each rank up front")
# What the rank saw of its process group is a fact only the rank can observe.
problems = h.hand_over("setup/problems", problems)
if h.verifies:
    h.record_case("setup", not problems, n=1, msg="; ".join(problems) or None)

# ---- average --------------------------------------------------------------------------------
for name, n in h.cases.items():
    if name == "setup":
        continue
    result = None  # the first failing iteration's, else the last one's
    for it in range(2):
        half = 0.5 if h.rank == 0 else 0.0
        mem = t_moved = ret_new = None
        if h.computes:
            x = (h.exact(n, iter=it, fine=True) + half) * h.world
            # t is a view into the middle of a larger buffer: the result must land in t's
            # memory.
            buf = torch.full((n + 2,), float("nan"), device=h.device)
            t = buf[1:n + 1]
            t.copy_(x)
            mem = buf[1:n + 1]
            with h.forbid():
                ret = learner.average(t)
            # For the messages: the tensor object when its storage was swapped, a returned
            # tensor that is not the one given.
            if isinstance(t, torch.Tensor) and t.data_ptr() != mem.data_ptr():
                t_moved = t
            if isinstance(ret, torch.Tensor) and ret.data_ptr() != mem.data_ptr():
                ret_new = ret
        tag = f"{name}/{it}"
        mem = h.hand_over(tag + "/mem", mem)
        t_moved = h.hand_over(tag + "/t", t_moved)
        ret_new = h.hand_over(tag + "/ret", ret_new)
        if not h.verifies:
            continue
        x = (h.exact(n, iter=it, device=mem.device, fine=True) + half) * h.world
        want = h.exact_sum(n, iter=it, device=mem.device, fine=True) + 0.5  # sum over ranks of x / world
        total = want * h.world                                  # the sum over ranks, exact
        r = h.compare(mem, want)
        if result is None or result.ok():
            result = r
        if r.ok():
            continue
        hint = f"{h.world} ranks, iteration {it}"
        if isinstance(t_moved, torch.Tensor) and t_moved.shape == want.shape \
                and h.compare(t_moved.to(want.device), want).ok():
            hint += ("; the tensor object holds the mean, but in new memory: t.data = ... or "
                     "t.set_(...) swaps its storage, so the memory the caller gave you (a "
                     "gradient bucket, a parameter's .grad) never sees the result: write into "
                     "it, e.g. t.div_(n)")
        elif isinstance(ret_new, torch.Tensor) and ret_new.shape == want.shape \
                and h.compare(ret_new.to(want.device), want).ok():
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
        elif bool(((mem - want).abs() <= want.abs() * 2.0 ** -7).all()):
            hint += ("; every element is within a rounding of the mean: the data went through "
                     "a type narrower than float32 (float16 or bfloat16, for half the bytes?), "
                     "which keeps 11 or 8 significant bits where these inputs have 13. Reduce "
                     "t itself, in float32")
        else:
            k = next((k for k in range(1, 9) if k != h.world
                      and torch.equal(mem, total / k)), None)
            if k is not None:
                hint += (f"; every element is the sum over ranks divided by {k}, but there "
                         f"are {h.world} ranks: divide by dist.get_world_size()")
        r.msg_parts.append(hint)
    if h.verifies:
        h.record(name, result)

sys.exit(h.finish())
