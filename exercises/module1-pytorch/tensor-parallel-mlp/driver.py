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
"""
import gc
import statistics
import sys
import warnings

import torch
import torch.nn.functional as F

import mgpu_harness

TOKENS = 16
PERF_TOKENS = 4096


def hidden_of(d):
    """4d, or 4d + 2 for an odd d: 2(2d + 1), which neither 3 nor 4 ranks divide."""
    return 4 * d + (2 if d % 2 else 0)


def weights(d, dtype, device, salt):
    g = torch.Generator().manual_seed(salt)
    hidden = hidden_of(d)
    w1 = torch.randn(hidden, d, generator=g) / d**0.5
    b1 = torch.randn(hidden, generator=g) * 0.1
    w2 = torch.randn(d, hidden, generator=g) / hidden**0.5
    b2 = torch.randn(d, generator=g)
    return [t.to(device=device, dtype=dtype) for t in (w1, b1, w2, b2)]


def reference(x, w1, b1, w2, b2):
    c = [t.to(torch.float64) for t in (x, w1, b1, w2, b2)]
    return F.gelu(c[0] @ c[1].T + c[2]) @ c[3].T + c[4]


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


def replicated_input(tokens, d, salt):
    """The same input on every rank (tensor parallelism splits the weights, not the tokens)."""
    g = torch.Generator().manual_seed(salt)
    return torch.randn(tokens, d, generator=g).to(device=h.device, dtype=dtype)


def after_timing(name, mlp, x, last, w):
    """The output of the last timed call (x had not changed), then new data in x and one more
    call as the timed ones made, both compared with the float64 reference; one record."""
    def check(y, want):
        return h.compare(y.to(torch.float64), want, tol=rtol * want.pow(2).mean().sqrt().item(),
                         rtol=rtol)

    r = check(last, reference(x, *w))
    if not r.ok():
        r.msg_parts.append("the output of the last timed call was wrong")
    x.copy_(replicated_input(x.shape[0], x.shape[1], seed * 7 + 200))
    want = reference(x, *w)
    with h.forbid():
        with torch.no_grad():
            y = mlp(x)
    r2 = check(y, want)
    if not r2.ok():
        r2.msg_parts.append(AFTER_TIMING)
    r.add(r2)
    if not r.ok():
        r.msg_parts.append(f"performance case {name}: every call must do the whole work, "
                           "repeated calls with the same buffers included")
    h.record("after-timing", r)


h = mgpu_harness.init(default_cases={"small": 48, "wide": 96})
learner = h.import_learner("tp_mlp")
h.init_process_group()
dtype = torch.bfloat16 if h.on_gpu else torch.float32
rtol = 2e-2 if h.on_gpu else 1e-4
seed = h.seed % 2**31

for name, d in h.cases.items():
    w1, b1, w2, b2 = weights(d, dtype, h.device, seed + d)
    problems = []
    mlp = y = None
    gc.collect()
    before = live_storages()
    given = [t.clone() for t in (w1, b1, w2, b2)]
    with h.forbid():
        mlp = learner.ParallelMLP(*given)
    del given
    gc.collect()
    # Numbers in storages that appeared while the module was built and are still alive.
    new = sum(st.nbytes() for k, st in live_storages().items() if k not in before)
    del before
    kept = max(held_values(mlp), new // w1.element_size())
    most_units = -(-w1.shape[0] // h.world)  # hidden units of the largest shard
    allowed = most_units * (2 * d + 1) + d
    if kept > allowed:
        problems.append(f"this rank keeps {kept} numbers alive after building ParallelMLP; "
                        f"its shard is {allowed} (w1 rows, b1, w2 columns for 1/{h.world} of "
                        "the hidden units, plus b2): keep only your shard, as copies (a view "
                        "such as w1[lo:hi] keeps the whole of w1 alive), and no reference to "
                        "the full weights anywhere")
    result = None
    for it in range(2):
        g = torch.Generator().manual_seed(seed * 7 + it)
        x = torch.randn(TOKENS, d, generator=g).to(device=h.device, dtype=dtype)
        want = reference(x, w1, b1, w2, b2)
        with h.count_calls(["ProcessGroup.allreduce"]) as calls, h.forbid():
            with torch.no_grad():
                y = mlp(x.clone())
        scale = want.pow(2).mean().sqrt().item()
        r = h.compare(y.to(torch.float64), want, tol=rtol * scale, rtol=rtol)
        if result is None or result.ok():
            result = r
        if problems:
            continue  # report the first iteration's problems; keep calling forward
        if len(calls) != 1:
            problems.append(f"forward made {len(calls)} all_reduce calls; column-parallel then "
                            "row-parallel needs exactly one, on the second layer's output")
        if not r.ok():
            diff = y.to(torch.float64) - want
            extra = b2.to(torch.float64) * (h.world - 1)
            if h.world > 1 and torch.allclose(diff, extra.expand_as(diff),
                                              rtol=rtol, atol=rtol * scale):
                problems.append(f"the output is off by {h.world - 1} x b2: b2 was added on every "
                                "rank before the all-reduce; add it once, after")
            else:
                problems.append(f"iteration {it}: the output differs from the single-device "
                                f"MLP (hidden size {w1.shape[0]} on {h.world} ranks: do the "
                                "shards cover every hidden unit when it does not divide "
                                "evenly?)")
    if problems:
        result.bad = max(result.bad, 1)
        result.msg_parts += problems
    h.record(name, result)

if h.timing:
    for name, d in h.perf_cases.items():
        w1, b1, w2, b2 = weights(d, dtype, h.device, seed + d)
        with h.forbid():
            mlp = learner.ParallelMLP(w1, b1, w2, b2)
        x = replicated_input(PERF_TOKENS, d, seed * 7 + 100)

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
        after_timing(name, mlp, x, last[0], (w1, b1, w2, b2))
else:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
