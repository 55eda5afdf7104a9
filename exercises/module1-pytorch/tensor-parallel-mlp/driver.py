"""Driver of module1/tensor-parallel-mlp (course-owned; the learner edits tp_mlp.py).

ParallelMLP(w1, b1, w2, b2) gets the full weights of y = gelu(x @ w1.T + b1) @ w2.T + b2 on
every rank and must keep only its shard: the first layer split by output features
(column-parallel), the second by input features (row-parallel), so forward needs exactly one
all_reduce and no other collective (every route counted: h.count_collectives). A case's n is
the model width d; the hidden size is 4d for an even d and 4d + 2 for an odd d, which 3 and 4
ranks do not divide (case "odd"), so a split that drops the last units fails. The output is
compared on every rank with the single-device MLP computed in float64 from the same weights:
float32 on CPU (relative tolerance 1e-4), bfloat16 on GPUs (2e-2, scaled by the output's RMS).

What the learner's code keeps is measured twice. (1) The module's own tensors (parameters,
buffers, attributes, inside lists and dicts too), by whole storage, so a view such as
w1[lo:hi] counts as the whole of w1; its message counts numbers. (2) The ledger of
allocations, for every other place and form. The census of live tensors it replaces compared
the tensors alive before and after construction: a red-team variant kept the full weights as
sparse COO tensors in a module global (their untyped_storage() raises, so the census skipped
them) and computed the whole MLP on every rank; Python lists, bare storages and autograd's
saved tensors hid from it the same way, and so did a buffer allocated at import and filled
later, which is not new when the module is built. Whatever their form, values kept alive
occupy memory that some allocator handed out while the learner's code ran. So from before the
learner's module is imported to the end of the correctness cases, torch's profiler runs with
memory profiling (every allocation and free of torch's CPU and CUDA allocators, by address)
with the stretches of learner code (the import, each construction with the copies of the
weights it is given, each forward) marked by record_function, and tracemalloc traces Python's
allocations with whole stacks. Right after each construction the ledger sums what was
allocated in those stretches and is still alive, the given copies included if anything holds
them (a reference, a view, a saved tensor), and the Python memory allocated with a frame of
the learner's file innermost among the course's and the learner's frames. That may exceed the
largest shard, in the run's dtype, by SLACK_BYTES. A profiler stopped or replaced under the
learner's code (exiting a fresh torch.autograd.profiler.profile stops any running one) is
noticed: its events lack allocations the driver made before the import and before each
construction; the policy refuses torch's profiler in learner files before that (variant
swap-profiler), this is the second line. On a GPU the CUDA caching allocator's frees do not all
reach the profiler, so a CUDA allocation counts only while the allocator's own snapshot, taken
at the moment of the measure, shows its block live. The weights and inputs are made before the
session, which then traces little but the learner's code.

Not covered: values kept outside this process (a file written through a c10d FileStore, the
memory of another rank), memory from an allocator that neither torch's profiler nor
tracemalloc sees, and a lossless compression of the full weights below a shard's size (they
are whole numbers in [-64, 64] times a scale: one byte each would do).

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
import os
import statistics
import sys
import tracemalloc
import warnings

import torch
import torch.distributed as dist
import torch.nn.functional as F

import mgpu_harness

TOKENS = 16
# Bytes the learner's code may keep beyond its shard: its Python objects (the module, its dicts,
# the Parameter objects, the classes and functions of its file, caches torch fills on its first
# calls): up to 13.4 KiB for the reference solution (CPU, 2 and 3 ranks; 12.8 KiB on one H200,
# 2026-12-02), whose torch allocations are exactly its shard (on a GPU each parameter's block
# rounded up to 512 bytes). docs/validation/nvidia-h200-module1-integrity/.
SLACK_BYTES = 24 * 1024
KEEP_ONLY = ("keep only your shard, as copies (a view such as w1[lo:hi] keeps the whole of w1 "
             "alive), and no reference to the full weights anywhere")
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


class Ledger:
    """What the learner's code has allocated and still holds, at chosen moments (the
    docstring above, (2)). Made in the rank before the learner's module is imported; stop()
    after the correctness cases, before anything is timed."""

    LEARNER = "mgpu-learner"

    def __init__(self):
        from torch.profiler import ProfilerActivity, profile

        # The driver's own markers carry a secret: record_function is the learner's to call
        # too, and a "disown" marker of its own would drop its buffer from the ledger.
        secret = os.urandom(8).hex()
        self.measure_name = f"mgpu-measure {secret}"
        self.disown_prefix = f"mgpu-disown {secret} "
        os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # no "no GPU" chatter on the CPU
        self.python = []  # per measure(): Python bytes allocated by the learner's file
        # Per measure(), on a GPU: the addresses of the CUDA caching allocator's live blocks.
        # Its frees do not all reach the profiler (on an H200 with torch 2.11 the copies given
        # to the constructor stayed "alive" in the events after they were freed), so a CUDA
        # allocation counts only while its block is live in the allocator's own snapshot.
        self.cuda_live = []
        self.snapshot = torch._C._cuda_memorySnapshot if h.on_gpu else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self.prof.start()  # first: it imports much of torch, which need not be traced
        # Whole stacks: an allocation made deep inside library code the learner's code called
        # still has the learner's frame on its stack.
        tracemalloc.start(sys.getrecursionlimit() + 64)
        self.sentinel = torch.empty(256)  # allocated in the session: its event must be there
        self.marks = [self.sentinel.data_ptr()]

    def learner(self):
        """Marks a stretch of learner code (import, construction, forward) for the profiler."""
        return torch.profiler.record_function(self.LEARNER)

    def mark(self, tensors):
        """Tensors the driver allocated just now: the profiler's events must show them."""
        self.marks.extend(t.data_ptr() for t in tensors if t.numel())

    def disown(self, t):
        """A tensor the learner's code returned: the driver's from now on, not counted (the
        process group may hold it a while after the driver has dropped it). Only where its
        memory is an allocation no larger than the tensor itself (rounded up as the CUDA
        allocator rounds), so a small view of a larger buffer disowns nothing."""
        if isinstance(t, torch.Tensor) and t.layout == torch.strided and not t.is_meta:
            with torch.profiler.record_function(
                    f"{self.disown_prefix}{t.data_ptr()} {t.numel() * t.element_size()}"):
                pass

    def measure(self, learner_file):
        """Notes this moment: stop() gives torch's part; Python's is summed now."""
        gc.collect()
        with torch.profiler.record_function(self.measure_name):
            pass
        if self.snapshot is not None:
            segments = self.snapshot((0, 0, False))["segments"]
            self.cuda_live.append({b["address"] for sg in segments for b in sg["blocks"]
                                   if b["state"] == "active_allocated"})
        total = 0
        # Grouped by stack (a list's floats share one), then whose is it: the innermost frame
        # of the learner's file, of this driver or the harness (the census's dispatch mode,
        # whose first sight of an op fills torch's caches), or of a module being loaded (what
        # a module the learner's file imports allocates as it loads is that module's).
        for st in tracemalloc.take_snapshot().statistics("traceback"):
            for f in reversed(st.traceback):
                if f.filename == learner_file:
                    total += st.size
                    break
                if f.filename in COURSE_FILES or f.filename.startswith("<frozen importlib"):
                    break
        self.python.append(total)

    def stop(self):
        """Ends the session. Returns, per measure(), {"torch": bytes or None, "python": bytes,
        "tampered": bool}. "torch" is None where this torch's profiler gives no allocation
        events by address."""
        tracemalloc.stop()
        out = [{"torch": None, "python": p, "tampered": False} for p in self.python]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.prof.stop()
        except Exception:  # noqa: BLE001 - stopped under the learner's code
            for o in out:
                o["tampered"] = True
            return out
        try:
            from torch._C._profiler import _EventType

            events, spans = [], []  # (time, what, ptr, size); learner stretches
            stack = list(self.prof.profiler.kineto_results.experimental_event_tree())
            while stack:
                e = stack.pop()
                stack.extend(e.children)
                if e.tag == _EventType.Allocation:
                    f = e.extra_fields
                    cuda = self.snapshot is not None and str(f.device).startswith("cuda")
                    events.append((e.start_time_ns, "a", f.ptr, f.alloc_size, cuda))
                elif e.name == self.LEARNER:
                    spans.append((e.start_time_ns, e.end_time_ns))
                elif e.name == self.measure_name:
                    events.append((e.start_time_ns, "m", 0, 0, False))
                elif e.name.startswith(self.disown_prefix):
                    ptr, nbytes = e.name[len(self.disown_prefix):].split()
                    events.append((e.start_time_ns, "d", int(ptr), int(nbytes), False))
        except (AttributeError, ImportError, RuntimeError, ValueError):
            return out
        allocated = {ptr for _, what, ptr, size, _ in events if what == "a" and size > 0}
        sums = []
        live = {}  # address -> (bytes, cuda) of what the learner's code allocated and holds
        for t, what, ptr, size, cuda in sorted(events):  # in the order they happened
            if what == "m":
                n = len(sums)
                sums.append(sum(b for p, (b, c) in live.items()
                                if not c or n >= len(self.cuda_live) or p in self.cuda_live[n]))
            elif what == "d":
                if live.get(ptr, (0, False))[0] <= -(-size // 512) * 512:
                    live.pop(ptr, None)
            elif size <= 0:
                live.pop(ptr, None)  # a free of memory from before the session: ignored
            elif any(a <= t <= b for a, b in spans):
                live[ptr] = (size, cuda)
            else:
                live.pop(ptr, None)  # handed out again, to the driver: freed before
        tampered = any(ptr not in allocated for ptr in self.marks) or len(sums) != len(out)
        for o, held in zip(out, sums):
            o["torch"] = held
        for o in out:
            o["tampered"] = tampered
        return out


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
COURSE_FILES = {os.path.abspath(__file__), __file__, mgpu_harness.__file__,
                os.path.abspath(mgpu_harness.__file__)}
dtype = torch.bfloat16 if h.on_gpu else torch.float32
rtol = 2e-2 if h.on_gpu else 1e-4
ledger = learner = None
prepared = {}  # the rank's: case -> (weights, inputs), made before the ledger's session
if h.computes:
    h.init_process_group()
    # Every case's weights and inputs first: the ledger then traces little but the learner's
    # code (tracemalloc with whole stacks slows every Python allocation).
    for ci, (name, d) in enumerate(h.cases.items()):
        prepared[name] = (weights(d, ci), [replicated_input(TOKENS, d, ci, 10 + it)
                                           for it in range(2)])
    if h.on_gpu:
        # cuBLAS keeps a workspace per stream from its first matmul on, from torch's allocator:
        # made here, before the session, so that the first forward does not seem to keep it.
        a = torch.ones(64, 64, device=h.device, dtype=dtype)
        F.linear(F.linear(a, a, a[0]), a)
        torch.cuda.synchronize()
        del a
    ledger = Ledger()
    with ledger.learner():
        learner = h.import_learner("tp_mlp")
else:
    learner = h.import_learner("tp_mlp")  # None in the verifier

# The exercise is split (verifier: true, docs/protocol.md §4): this rank builds ParallelMLP from
# the weights rank 0 broadcast, calls forward and hands over its outputs, the numbers the module
# keeps alive and the all-reduces forward made; its verifier, which never loads the learner's
# module, makes the weights, the inputs and the reference from the seed and records the cases.

def shard_numbers(d):
    """Numbers in the largest shard: w1 rows, b1, w2 columns for 1/world of the hidden units,
    plus b2."""
    return -(-hidden_of(d) // h.world) * (2 * d + 1) + d


verdicts = {}  # the verifier's: case -> (Result, problems), recorded after the ledger's sums
shards = {}  # case -> (numbers, bytes) of the largest shard
# The rank's: the first case after whose construction the learner's file held more in Python
# objects than its shard (the ledger's Python part is known at once). The later cases are not
# built: keeping the full weights as Python objects makes a large case run for minutes under
# tracemalloc (a run error by timeout, not the verdict the small case already gives).
over_in_python = None
for ci, (name, d) in enumerate(h.cases.items()):
    hidden = hidden_of(d)
    kept = skipped = None
    if h.computes:
        w, xs = prepared.pop(name)
        mlp = y = None  # nothing of the last case's outputs left to count
        if over_in_python is None:
            with ledger.learner():  # the copies count as the learner's while it holds them
                given = [t.clone() for t in w]
            ledger.mark(given)
            with h.forbid(), ledger.learner():
                mlp = learner.ParallelMLP(*given)
            del given
            ledger.measure(learner.__file__)
            kept = held_values(mlp)
            limit = shard_numbers(d) * torch.finfo(dtype).bits // 8 + SLACK_BYTES
            if ledger.python[-1] > limit:
                over_in_python = name
        else:
            ledger.measure(learner.__file__)  # one sum per case, as the verifier zips them
            skipped = over_in_python
        del w
    kept = h.hand_over(f"{name}/kept", kept)
    skipped = h.hand_over(f"{name}/skipped", skipped)
    problems = []
    if h.verifies:
        w1, b1, w2, b2 = weights(d, ci)
        allowed = shard_numbers(d)
        shards[name] = (allowed, allowed * w1.element_size())
        if skipped is not None:
            problems.append(f"not run: after case {skipped}, ParallelMLP kept more than its "
                            f"shard in Python objects (that case's report says how much): "
                            f"{KEEP_ONLY}")
        elif kept > allowed:
            problems.append(f"this rank keeps {kept} numbers alive after building ParallelMLP; "
                            f"its shard is {allowed} (w1 rows, b1, w2 columns for 1/{h.world} "
                            f"of the hidden units, plus b2): {KEEP_ONLY}")
    result = None
    for it in range(2):
        y = ncalls = others = None
        if h.computes and skipped is None:
            x = xs[it]
            xc = x.clone()
            with h.count_collectives() as calls, h.forbid(), ledger.learner():
                with torch.no_grad():
                    y = mlp(xc)
            ledger.disown(y)
            ncalls = sum(1 for c in calls if c.kind == "all_reduce")
            others = sorted({c.kind for c in calls
                             if c.kind not in ("all_reduce", "barrier", "wait")})
            del x, xc, calls
        y = h.hand_over(f"{name}/{it}/y", y)
        ncalls = h.hand_over(f"{name}/{it}/allreduce-calls", ncalls)
        others = h.hand_over(f"{name}/{it}/other-collectives", others)
        if not h.verifies or skipped is not None:
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
        if others:
            problems.append(f"forward launched other collectives ({', '.join(others)}): "
                            "column-parallel then row-parallel needs one all_reduce and "
                            "nothing else (no rank may fetch the other ranks' weights)")
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
        if result is None:  # not run (skipped): nothing compared
            result = mgpu_harness.Result(d)
        verdicts[name] = (result, problems)

# The ledger's sums (the docstring, (2)), per case, once the profiler has stopped; the cases
# are recorded then.
allocated = ledger.stop() if h.computes else None
del ledger
allocated = h.hand_over("kept-allocations", allocated)
if h.verifies:
    for (name, (result, problems)), a in zip(verdicts.items(), allocated):
        allowed, shard_bytes = shards[name]
        held = (a["torch"] or 0) + a["python"]
        if a["tampered"]:
            problems.append("the profiler that counts what ParallelMLP keeps was stopped or "
                            "replaced while your code ran: leave torch's profiler alone")
        elif not problems and held > shard_bytes + SLACK_BYTES:
            problems.append(f"building ParallelMLP left {held} bytes allocated by your code on "
                            f"this rank ({a['torch']} by torch's allocators, {a['python']} in "
                            f"Python objects) where its shard takes {shard_bytes} (w1 rows, "
                            f"b1, w2 columns for 1/{h.world} of the hidden units, plus b2, in "
                            "the given dtype): the full weights are kept in some other form "
                            f"(sparse tensors, Python lists, storages, saved tensors...): "
                            f"{KEEP_ONLY}")
        if problems:
            result.forced = True  # the driver's finding, whatever the comparison said
            result.msg_parts += problems
        h.record(name, result)
elif h.computes and allocated and any(a["torch"] is None and not a["tampered"]
                                      for a in allocated):
    h.note("this torch's profiler gives no allocation events: what torch's allocators hand "
           "out to the learner's code is not counted")


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
