"""Driver of module1/tensor-parallel-mlp (course-owned; the learner edits tp_mlp.py).

ParallelMLP(w1, b1, w2, b2) gets the full weights of y = gelu(x @ w1.T + b1) @ w2.T + b2 on
every rank and must keep only its shard: the first layer split by output features
(column-parallel), the second by input features (row-parallel), so forward needs exactly one
all_reduce. A case's n is the model width d; the hidden size is 4d for an even d and 4d + 2
for an odd d, which 3 and 4 ranks do not divide (case "odd"), so a split that drops the last
units fails. The weights and the input the learner gets are copies: what the learner's module
keeps alive after construction (anywhere: parameters, attributes, globals, closures) is found
by comparing the tensors alive before and after, so a view of the full weights, or a copy
kept "just in case", counts in full. The output is compared on every rank with the
single-device MLP computed in float64 from the same weights: float32 on CPU (relative
tolerance 1e-4), bfloat16 on GPUs (2e-2, scaled by the output's RMS).

Performance (GPU, bfloat16): forward time against the same full MLP on one GPU divided by the
number of ranks (perfect scaling), so the ratio is the scaling efficiency T1 / (N * TN). Then
"after-timing": the last timed call's output, then new data in the timed input and one more
call, both checked, so a forward that stops working after its first calls (when timed) fails.

The weights and the input, the same on every rank, are rank 0's inputs, broadcast by rank 0.
The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier"): the rank hands over the outputs of
forward and what it alone can see (how many numbers the module keeps alive, how many
all-reduces forward made); the verifier makes the weights, the input and the float64
reference from the seed.
"""
import gc
import math
import statistics
import sys
import warnings

import torch
import torch.distributed as dist
import torch.nn.functional as F

import mgpu_harness

TOKENS = 16
PERF_TOKENS = 4096
UNIT = 3**0.5 / 64  # h.exact's whole numbers in [-64, 64] times UNIT: uniform, variance 1


def hidden_of(d):
    """4d, or 4d + 2 for an odd d: 2(2d + 1), which neither 3 nor 4 ranks divide."""
    return 4 * d + (2 if d % 2 else 0)


def from_rank0(shapes, scales, it, salt=0):
    """Tensors every rank holds alike: rank 0's inputs of iteration it (salt, salt + 1, ... for
    the shapes in turn) times the scales, made by rank 0 and broadcast to the other ranks in
    the ranks, made from the seed in the verifier. Each its own copy, in the run's dtype."""
    sizes = [math.prod(s) for s in shapes]
    if h.computes and h.rank != 0:
        flat = torch.empty(sum(sizes), dtype=dtype, device=h.device)
    else:
        flat = torch.cat([(h.exact(n, rank=0, iter=it, salt=salt + k) * sc).to(dtype)
                          for k, (n, sc) in enumerate(zip(sizes, scales))])
    if h.computes and h.world > 1:
        dist.broadcast(flat, 0)
    return [t.view(s).clone() for t, s in zip(torch.split(flat, sizes), shapes)]


def weights(d, it):
    """w1, b1, w2, b2 with the variances of randn / sqrt(fan_in), 0.1 randn and randn."""
    hidden = hidden_of(d)
    return from_rank0([(hidden, d), (hidden,), (d, hidden), (d,)],
                      [UNIT / d**0.5, UNIT * 0.1, UNIT / hidden**0.5, UNIT], it)


def replicated_input(tokens, d, it, salt):
    """The same input on every rank (tensor parallelism splits the weights, not the tokens)."""
    return from_rank0([(tokens, d)], [UNIT], it, salt)[0]


def reference(x, w1, b1, w2, b2):
    c = [t.to(torch.float64) for t in (x, w1, b1, w2, b2)]
    return F.gelu(c[0] @ c[1].T + c[2]) @ c[3].T + c[4]


def as_f64(y):
    """y in float64 for the comparison (anything else is left to compare()'s message)."""
    return y.to(torch.float64) if isinstance(y, torch.Tensor) else y


def live_storages():
    """The storages of every tensor object alive in this process, keyed by address. The
    storage objects are kept, so no address is reused while the dict lives."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for o in gc.get_objects():
            if isinstance(o, torch.Tensor):
                try:
                    st = o.untyped_storage()
                except (RuntimeError, NotImplementedError):
                    continue
                if st.data_ptr():
                    out[(str(st.device), st.data_ptr())] = st
    return out


def held_values(module):
    """Values kept alive by the module: every tensor among its submodules' parameters, buffers
    and attributes (also inside lists, tuples and dicts), counted by whole storage, so a view
    of the full weight counts as the full weight."""
    storages = {}

    def visit(v):
        if isinstance(v, torch.Tensor):
            st = v.untyped_storage()
            storages[st.data_ptr()] = st.nbytes() // v.element_size()
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)

    for m in module.modules():
        for v in list(m.parameters(recurse=False)) + list(m.buffers(recurse=False)):
            visit(v)
        for v in vars(m).values():
            visit(v)
    return sum(storages.values())


AFTER_TIMING = ("after the timed calls, a call with new data in the same buffers gave a wrong "
                "result")


def after_timing(name, pi, d, mlp=None, x=None, last=None):
    """The output of the last timed call (x had not changed), then new data in x and one more
    call as the timed ones made (in the rank), both compared by the verifier with the float64
    reference; one record."""
    y = None
    last = h.hand_over(f"after-timing/{name}/last", last)
    if h.computes:
        x.copy_(replicated_input(x.shape[0], x.shape[1], 100 + pi, 11))
        with h.forbid():
            with torch.no_grad():
                y = mlp(x)
    y = h.hand_over(f"after-timing/{name}/fresh", y)
    if not h.verifies:
        return
    w = weights(d, 100 + pi)

    def check(got, x):
        want = reference(x, *w)
        return h.compare(as_f64(got), want, tol=rtol * want.pow(2).mean().sqrt().item(),
                         rtol=rtol)

    r = check(last, replicated_input(PERF_TOKENS, d, 100 + pi, 10))
    if not r.ok():
        r.msg_parts.append("the output of the last timed call was wrong")
    r2 = check(y, replicated_input(PERF_TOKENS, d, 100 + pi, 11))
    if not r2.ok():
        r2.msg_parts.append(AFTER_TIMING)
    r.add(r2)
    if not r.ok():
        r.msg_parts.append(f"performance case {name}: every call must do the whole work, "
                           "repeated calls with the same buffers included")
    h.record("after-timing", r)


h = mgpu_harness.init(default_cases={"small": 48, "wide": 96})
learner = h.import_learner("tp_mlp")  # None in the verifier
if h.computes:
    h.init_process_group()
dtype = torch.bfloat16 if h.on_gpu else torch.float32
rtol = 2e-2 if h.on_gpu else 1e-4

# The exercise is split (verifier: true, docs/protocol.md §4): this rank builds ParallelMLP from
# the weights rank 0 broadcast, calls forward and hands over its outputs, the numbers the module
# keeps alive and the all-reduces forward made; its verifier, which never loads the learner's
# module, makes the weights, the inputs and the reference from the seed and records the cases.

for ci, (name, d) in enumerate(h.cases.items()):
    hidden = hidden_of(d)
    kept = None
    if h.computes:
        w = weights(d, ci)
        mlp = None
        gc.collect()
        before = live_storages()
        given = [t.clone() for t in w]
        with h.forbid():
            mlp = learner.ParallelMLP(*given)
        del given
        gc.collect()
        # Numbers in storages that appeared while the module was built and are still alive.
        new = sum(st.nbytes() for k, st in live_storages().items() if k not in before)
        del before
        kept = max(held_values(mlp), new // w[0].element_size())
        del w
    kept = h.hand_over(f"{name}/kept", kept)
    problems = []
    if h.verifies:
        w1, b1, w2, b2 = weights(d, ci)
        most_units = -(-hidden // h.world)  # hidden units of the largest shard
        allowed = most_units * (2 * d + 1) + d
        if kept > allowed:
            problems.append(f"this rank keeps {kept} numbers alive after building ParallelMLP; "
                            f"its shard is {allowed} (w1 rows, b1, w2 columns for 1/{h.world} "
                            "of the hidden units, plus b2): keep only your shard, as copies (a "
                            "view such as w1[lo:hi] keeps the whole of w1 alive), and no "
                            "reference to the full weights anywhere")
    result = None
    for it in range(2):
        y = ncalls = None
        if h.computes:
            x = replicated_input(TOKENS, d, ci, 10 + it)
            with h.count_calls(["ProcessGroup.allreduce"]) as calls, h.forbid():
                with torch.no_grad():
                    y = mlp(x.clone())
            ncalls = len(calls)
            del x
        y = h.hand_over(f"{name}/{it}/y", y)
        ncalls = h.hand_over(f"{name}/{it}/allreduce-calls", ncalls)
        if not h.verifies:
            continue
        want = reference(replicated_input(TOKENS, d, ci, 10 + it), w1, b1, w2, b2)
        scale = want.pow(2).mean().sqrt().item()
        r = h.compare(as_f64(y), want, tol=rtol * scale, rtol=rtol)
        if result is None or result.ok():
            result = r
        if problems:
            continue  # report the first iteration's problems; keep checking the outputs
        if ncalls != 1:
            problems.append(f"forward made {ncalls} all_reduce calls; column-parallel then "
                            "row-parallel needs exactly one, on the second layer's output")
        if not r.ok():
            diff = as_f64(y) - want if isinstance(y, torch.Tensor) else None
            extra = b2.to(torch.float64) * (h.world - 1)
            if h.world > 1 and diff is not None and diff.shape == want.shape \
                    and torch.allclose(diff, extra.expand_as(diff), rtol=rtol, atol=rtol * scale):
                problems.append(f"the output is off by {h.world - 1} x b2: b2 was added on every "
                                "rank before the all-reduce; add it once, after")
            else:
                problems.append(f"iteration {it}: the output differs from the single-device "
                                f"MLP (hidden size {hidden} on {h.world} ranks: do the "
                                "shards cover every hidden unit when it does not divide "
                                "evenly?)")
    if h.verifies:
        if problems:
            result.bad = max(result.bad, 1)
            result.msg_parts += problems
        h.record(name, result)

if h.timing:
    for pi, (name, d) in enumerate(h.perf_cases.items()):
        if not h.computes:
            after_timing(name, pi, d)
            continue
        w1, b1, w2, b2 = weights(d, 100 + pi)
        with h.forbid():
            mlp = learner.ParallelMLP(w1, b1, w2, b2)
        x = replicated_input(PERF_TOKENS, d, 100 + pi, 10)

        last = [None]

        def yours(i):
            with torch.no_grad():
                last[0] = mlp(x)

        def single(i):
            with torch.no_grad():
                F.gelu(x @ w1.T + b1) @ w2.T + b2

        # bytes: what the all-reduce carries (the metric is time; shown for reference).
        r = h.time_pair(name, bytes=PERF_TOKENS * d * x.element_size(), factor=1,
                        metric="time", yours=yours, baseline=single,
                        scale_baseline=1.0 / h.world)
        if r:
            ys, bs = h.max_over_ranks(r[0]), h.max_over_ranks(r[1])
            eff = statistics.median(b / y for y, b in zip(ys, bs))
            if h.rank == 0:
                h.value(f"{name}: scaling efficiency T1/(N*TN) on {h.world} ranks", eff, "")
        after_timing(name, pi, d, mlp, x, last[0])
elif h.computes:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
