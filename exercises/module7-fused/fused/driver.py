"""Driver of module7/fused (course-owned; the learner edits fused.py).

fused_ag_gemm(ctx, b_shard, out): the all-gather + GEMM of module7/unfused, fused: every rank's
m x K shard of A sits in symmetric memory (this driver's, from torch.distributed.
_symmetric_memory), and the learner asks for the other ranks' pieces with ctx.pull(p, i), which
queues on the caller's current stream a copy-engine copy of piece i of rank p's shard into
ctx.gathered and, behind it, a stream write of ctx.epoch into ctx.progress[p * ctx.splits + i].
This rank's own pieces are delivered by the driver, the same way, on a stream of its own. The
learner's Triton GEMM, launched at once on the current stream, waits in each output tile for
the flags of the pieces its rows lie in, and computes the tile as soon as they have landed.

Why the pull is the driver's: the flag must be written by something that needs no SM (a copy
engine's stream write), because the GEMM's waiting programs may hold every SM; and the driver
must be able to make pieces land late, on purpose, to catch a GEMM that does not wait. The own
pieces are not the learner's for the same reason: a copy within one GPU may be carried out by a
kernel (measured on an H100: the reference hung at 8192 x 8192 with its own pieces pulled by
copy_ behind a GEMM whose waiting programs held every SM). The driver delivers them from pinned
host memory (a copy engine) in the checked calls, and writes them before the call, in stream
order, in the timed ones (the data does not change there), flags written behind them.

What each checked call must survive (task.md states the contract):
- the current stream is busy when the call is made: the driver writes this rank's shard into
  its symmetric slot, queues a ~1 ms GPU sleep, then fills ctx.gathered and out with NaN and
  meets the other ranks in a device-side barrier (all on that stream). Pulls queued on a stream
  not ordered after the current one run before the NaN fill and are overwritten by it;
- every piece lands late: before each piece's copy, ctx.pull (and the driver's delivery of the
  own pieces) queues on the same stream a copy of LATE_BYTES from pinned host memory (a copy
  engine, no SM), so a tile that reads its rows without waiting for their flag (or waits for
  only one of the pieces it spans, or for a flag left over from the previous call) reads NaN;
- epochs only grow, 1, 2, 3, ... over the whole run, and ctx.progress is never reset: a flag
  compared with 1 (or with "not 0") is already set on the second call.
- a piece never pulled in a call is reported at once (the GEMM would wait for it forever; the
  driver sets its flag itself so the kernel can end); a kernel still running WATCHDOG_S after
  the call is reported as a hang.

Correctness is exact: whole numbers in [-31, 31] in bfloat16 (exact; float8 holds up to 16), products in float32
(exact up to 2^24), compared element by element on every rank with the float64 product; out is
float32 in these cases. Case "ordering" reads the PTX of the learner's Triton kernels (compiled
into a cache directory of this run): the flag wait must be an acquire (ld/atom .acquire at gpu
or sys scope).

Performance (GPU, bfloat16, M = K = 8192, N = the perf case's n, each rank N/world columns,
out bfloat16): GPU time (gated: calls queued behind a sleep, without the host's launch cost)
against the course's chunked overlap of module7/chunked-overlap (a ring of batch_isend_irecv,
each chunk's matmul while the next travels), in the same run. The unfused
form, the GEMM alone and the copy-engine gather alone are timed for information: the fused
form cannot beat max(GEMM alone, gather alone). After each timed case, case "after-timing": the
last timed call's out must still hold A @ b_shard (its inputs never changed).

The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier"). The rank hands over every checked
call's out with what only it saw (pieces never pulled, whether the function returned something
other than out), what it found in the PTX of the learner's kernels, and each timed case's last
out; the verifier makes the products from every rank's shard, which the rank itself cannot
make. The checked calls' outputs go over only after the last checked call, so that the
verifier's work on the GPU never runs beside those calls, whose pieces must land late.
"""
import os
import sys
import traceback

import torch
import torch.distributed as dist

import mgpu_harness

WATCHDOG_S = 30.0         # a call still running on the GPU after this is a hang
SLEEP_CYCLES = 2_000_000  # torch.cuda._sleep before each checked call's fills: ~1 ms
LATE_BYTES = 4 << 20      # pinned host -> device copy queued before every pulled piece
ITERS = 3                 # checked calls per case, with fresh data each
PERF_M = 8192
PERF_K = 8192
SPLITS = 4                # pieces per rank's shard (fewer when a shard has fewer rows)
PERF_ITER = 1 << 19       # iter of the timed data
LEARNER = "fused.py"
NAN = float("nan")


def dims(n):
    return n, 2 * n + 1, n + 3  # m rows per rank, K, columns of this rank's weight shard


def layout(m):
    """(splits, rows_per_split) of an m-row shard: at most SPLITS pieces, every one non-empty
    (the last may have fewer rows)."""
    q = -(-m // min(SPLITS, m))
    return -(-m // q), q


def piece_rows(m, q, p, i):
    """Rows [lo, hi) of ctx.gathered that piece i of rank p's shard fills."""
    lo = p * m + i * q
    return lo, min(lo + q, (p + 1) * m)


h = mgpu_harness.init(default_cases={"ordering": 1, "one-row": 1, "small": 8, "odd": 77,
                                     "wide": 256, "big": 1024},
                      default_perf_cases={"n2048": 2048, "n8192": 8192})
if not h.on_gpu:
    h.fail("harness", "setup", "module7/fused needs CUDA GPUs: symmetric memory, copy engines "
           "and Triton kernels do not run on the CPU")

# The exercise is split (verifier: true, docs/protocol.md §4): this rank sets up the symmetric
# memory, calls the learner and hands its results over; its verifier, which never loads the
# learner's module and alone knows every rank's shard, makes the expected products and records
# the cases.
W, R, dev = h.world, h.rank, h.device
torch.backends.cuda.matmul.allow_tf32 = False
_barrier = h.real("torch.distributed.barrier")
_all_gather = h.real("torch.distributed.all_gather_into_tensor")
_batch_p2p = h.real("torch.distributed.batch_isend_irecv")
_matmul = h.real("torch.matmul")

if h.computes:
    os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
    # The learner's Triton kernels compile into a directory of this process alone, so that the
    # PTX read by case "ordering" is theirs and from this run (set before triton is imported).
    TRITON_DIR = os.path.join(h.run_dir, f"triton-cache-rank{h.rank}-{os.getpid()}")
    os.makedirs(TRITON_DIR, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = TRITON_DIR

learner = h.import_learner("fused")  # None in the verifier

if h.computes:
    h.init_process_group()

    import torch.distributed._symmetric_memory as symm_mem  # after the process group

    try:
        symm_mem.set_backend("CUDA")
    except RuntimeError:
        pass  # torch 2.11 on the course's H100 refused the name; its default backend is used
    _write_flag = torch.ops.symm_mem.stream_write_value32_

    # ---- symmetric memory ------------------------------------------------------------------

    shapes = [dims(n) for n in h.cases.values()]
    if h.timing:
        shapes += [(PERF_M // W, PERF_K, n // W) for n in h.perf_cases.values()]
    CAP = max(m * K for m, K, _ in shapes)  # bfloat16 elements of each rank's slot
    slot = symm_mem.empty(CAP, dtype=torch.bfloat16, device=dev)
    hdl = symm_mem.rendezvous(slot, dist.group.WORLD)
    if int(getattr(hdl, "multicast_ptr", 0) or 0) != 0:
        h.fail("harness", "symmetric memory", "the slot came with an NVLink multicast mapping "
               "although TORCH_SYMM_MEM_DISABLE_MULTICAST=1: this course never uses multicast; "
               "stop and report it")
    SLOT_OFF = (slot.data_ptr() - hdl.buffer_ptrs[hdl.rank]) // slot.element_size()
    if hdl.world_size != W or hdl.rank != R:
        h.fail("harness", "symmetric memory", f"rendezvous gave rank {hdl.rank} of "
               f"{hdl.world_size}, expected {R} of {W}")

    late_src = torch.zeros(LATE_BYTES, dtype=torch.uint8, pin_memory=True)
    late_dst = torch.empty(LATE_BYTES, dtype=torch.uint8, device=dev)
    copy_stream = torch.cuda.Stream()
    own_stream = torch.cuda.Stream()  # the driver's delivery of this rank's own pieces
    MAX_PIECES = W * SPLITS
    # uint32: what stream_write_value32_ wants
    progress = torch.zeros(MAX_PIECES, dtype=torch.uint32, device=dev)
    torch.cuda.synchronize()
    _barrier()


class FusedContext:
    """What fused_ag_gemm(ctx, b_shard, out) is given for one call. task.md documents every
    field; rows of piece (p, i) of ctx.gathered: ctx.rows(p, i)."""

    def __init__(self, m, K, gathered, splits, rows_per_split):
        self.rank = R                 # this rank, 0..world-1
        self.world = W                # ranks in the job
        self.m = m                    # rows of A per rank
        self.K = K                    # columns of A, rows of b_shard
        self.gathered = gathered      # (world*m, K) bfloat16 on this GPU, rank p's rows at p*m
        self.splits = splits          # pieces per rank's shard
        self.rows_per_split = rows_per_split  # rows of each piece (the last may have fewer)
        self.progress = progress      # uint32 flags, piece (p, i) at index p * splits + i
        self.copy_stream = copy_stream  # a stream of the driver's, for the pulls
        self.epoch = 0                # 1, 2, 3, ... the call's number, the same on every rank
        self.pull = None              # pull(p, i): see task.md

    def rows(self, p, i):
        return piece_rows(self.m, self.rows_per_split, p, i)

    def __repr__(self):
        return (f"FusedContext(rank={self.rank}, world={self.world}, m={self.m}, K={self.K}, "
                f"splits={self.splits}, rows_per_split={self.rows_per_split}, "
                f"epoch={self.epoch})")


def make_ctx(m, K):
    """A context for shards of m x K; pulls counted per call in ctx_state['pulled']."""
    splits, q = layout(m)
    gathered = torch.empty(W * m, K, dtype=torch.bfloat16, device=dev)
    peers = [hdl.get_buffer(p, (m * K,), torch.bfloat16, SLOT_OFF).view(m, K)
             for p in range(W)]
    ctx = FusedContext(m, K, gathered, splits, q)
    state = {"pulled": [0] * (W * splits), "late": False}

    def pull(p, i):
        """Queues on the current stream: piece i of rank p's shard into ctx.gathered, then
        ctx.progress[p * ctx.splits + i] = ctx.epoch (a stream write: no SM involved)."""
        if not isinstance(p, int) or not isinstance(i, int) or isinstance(p, bool) \
                or isinstance(i, bool):
            raise TypeError(f"ctx.pull(p, i) takes two Python ints, got {p!r}, {i!r}")
        if not (0 <= p < W and 0 <= i < splits):
            raise ValueError(f"ctx.pull({p}, {i}): p must be in [0, {W}) (ctx.world) and i "
                             f"in [0, {splits}) (ctx.splits)")
        if p == R:
            raise ValueError(f"ctx.pull({p}, {i}): {p} is this rank (ctx.rank); its own pieces "
                             "are delivered and flagged by the driver: pull the other ranks' "
                             "pieces only")
        lo, hi = ctx.rows(p, i)
        try:
            if state["late"]:
                late_dst.copy_(late_src, non_blocking=True)
            gathered[lo:hi].copy_(peers[p][lo - p * m:hi - p * m], non_blocking=True)
            _write_flag(progress, p * splits + i, ctx.epoch)
        except RuntimeError as e:
            if is_fault(e):
                fault(e, f"ctx.pull({p}, {i})")
            h.fail("driver", "ctx.pull", f"queueing piece ({p}, {i}) failed: {e}")
        state["pulled"][p * splits + i] += 1

    ctx.pull = pull
    return ctx, state, peers[R]


def begin(ctx, state, late, own_host=None):
    """Starts a call: the next epoch, and this rank's own pieces delivered and flagged. Checked
    calls (own_host: this rank's shard in pinned host memory) deliver them on own_stream,
    after the current stream's work and late like the pulls: copy engine and stream writes
    only, so they land even while the GEMM's programs wait on every SM. Timed calls write
    only the flags, on the current stream, behind the rows written before the timing."""
    ctx.epoch = begin.epoch = begin.epoch + 1
    state["pulled"] = [0] * len(state["pulled"])
    state["late"] = late
    base = R * ctx.splits
    if own_host is None:
        for i in range(ctx.splits):
            _write_flag(progress, base + i, ctx.epoch)
        return
    own_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(own_stream):
        for i in range(ctx.splits):
            lo, hi = ctx.rows(R, i)
            if late:
                late_dst.copy_(late_src, non_blocking=True)
            ctx.gathered[lo:hi].copy_(own_host[lo - R * ctx.m:hi - R * ctx.m], non_blocking=True)
            _write_flag(progress, base + i, ctx.epoch)


begin.epoch = 0


def is_fault(e):
    low = str(e).lower()
    return any(w in low for w in ("illegal memory access", "illegal address", "misaligned",
                                  "unspecified launch failure", "out of bounds"))


def fault(e, case):
    if not is_fault(e):
        raise e
    text = str(e)
    file, line = LEARNER, 0
    for fr in traceback.extract_tb(e.__traceback__):
        if os.path.basename(fr.filename) == LEARNER:
            line = fr.lineno
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    h.fail("learner", "fused_ag_gemm", f"case {case}: the GPU reported '{first}': a load or "
           "store outside the tensors (masks on the last row and column tiles, strides)",
           file, line)


def missing_pulls(ctx, state, case):
    """Pieces not pulled in this call: sets their flags so that the kernel can end, and
    returns what to tell the learner (None when every piece was pulled)."""
    missing = [(c // ctx.splits, c % ctx.splits) for c, k in enumerate(state["pulled"])
               if k == 0 and c // ctx.splits != R]
    if not missing:
        return
    with torch.cuda.stream(copy_stream):
        for p, i in missing:
            _write_flag(progress, p * ctx.splits + i, ctx.epoch)
    shown = ", ".join(f"({p}, {i})" for p, i in missing[:8])
    return (f"case {case}: call {ctx.epoch} never pulled piece(s) {shown}"
           f"{' ...' if len(missing) > 8 else ''} of {ctx.world * ctx.splits}: a tile that "
            "needs those rows would wait for their flag forever (the driver set it, so that "
            "your kernel could end). Pull every piece (p, i) of every other rank (p != "
            "ctx.rank) once per call")


def settle(ctx, case):
    try:
        done = h.wait_gpu(WATCHDOG_S)
    except RuntimeError as e:
        fault(e, case)
        return
    if not done:
        h.fail("learner", "fused_ag_gemm",
               f"case {case}: your kernel had not finished {WATCHDOG_S:.0f} s after call "
               f"{ctx.epoch}: a wait that never ends. Does each tile wait only for the "
               "pieces its rows lie in (piece of row r: p = r // m, i = (r % m) // "
               "rows_per_split, index p * splits + i), for a value of at least "
               "ctx.epoch, and was every piece pulled?")


def small(shape, rank, it, salt, top):
    """Whole numbers in [-top, top] (h.exact folded), rank's numbers of iteration it."""
    x = h.exact(shape, rank=rank, iter=it, salt=salt)
    return torch.remainder(x, 2 * top + 1) - top


def shard(m, K, rank, it, ci):
    """Rank's m x K shard of A in checked call it of case number ci: whole numbers in [-31, 31]
    (float8 e4m3 holds whole numbers up to 16 only: with [-8, 8] a tl.dot in float8 was exact;
    products' sums over K = 2n + 1 <= 2049 stay far below 2^24)."""
    return small((m, K), rank, 1000 * ci + it, 1, 31)


def weight(K, cols, it, ci):
    """This rank's weight shard in checked call it of case number ci."""
    return small((K, cols), R, 1000 * ci + it, 2, 31)


def diagnose(got, want, m, it):
    """Which pieces' rows are wrong, and what that most likely means."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        return None
    splits, q = layout(m)
    bad_pieces, nan_pieces = [], []
    for p in range(W):
        for i in range(splits):
            lo, hi = piece_rows(m, q, p, i)
            g = got[lo:hi].to(torch.float64)
            if torch.isnan(g).any():
                nan_pieces.append((p, i))
            elif not torch.equal(g, want[lo:hi]):
                bad_pieces.append((p, i))
    parts = []
    if nan_pieces:
        shown = ", ".join(f"({p}, {i})" for p, i in nan_pieces[:8])
        parts.append(
            f"call {it + 1} of the case: rows of piece(s) {shown} hold NaN. The driver fills "
            "ctx.gathered with NaN before every call and makes every piece land late, so a tile "
            "that loads its rows before their flag says ctx.epoch reads NaN: wait, with an "
            "acquire, for every piece the tile's rows lie in (a tile can span two pieces, or two "
            "ranks' shards), for a value of at least ctx.epoch (flags are never reset: a flag "
            "compared with 1 is already set from the previous call), before the first load. NaN "
            "can also come from pulls queued on a stream that does not wait for the current one "
            "(ctx.copy_stream.wait_stream(torch.cuda.current_stream())): they ran before the "
            "driver's NaN fill and were overwritten by it")
    if bad_pieces:
        shown = ", ".join(f"({p}, {i})" for p, i in bad_pieces[:8])
        parts.append(f"call {it + 1} of the case: rows of piece(s) {shown} are wrong numbers "
                     "(not NaN): rows multiplied from the wrong place of ctx.gathered (strides, "
                     "the rotation of the tile order), or the previous call's data")
    return "; ".join(parts) if parts else None


# ---- correctness -------------------------------------------------------------------------------

# The rank makes every checked call first, keeping each one's out (on the host) and what only it
# saw; they go to the verifier after the last call, so that the verifier's work on the GPU never
# runs beside a checked call.
calls = []
if h.computes:
    for ci, (name, n) in enumerate(h.cases.items()):
        if name == "ordering":
            continue
        m, K, cols = dims(n)
        ctx, state, own = make_ctx(m, K)
        for it in range(ITERS):
            a = shard(m, K, R, it, ci).to(torch.bfloat16)
            b_in = weight(K, cols, it, ci).to(torch.bfloat16)
            out = torch.empty(W * m, cols, dtype=torch.float32, device=dev)
            torch.cuda.synchronize()
            _barrier()  # every rank's previous call is over: slots may be rewritten
            own.copy_(a)
            own_host = a.cpu().pin_memory()
            torch.cuda._sleep(SLEEP_CYCLES)
            ctx.gathered.fill_(NAN)
            out.fill_(NAN)
            hdl.barrier(channel=0)  # every rank's slot holds this call's shard
            begin(ctx, state, late=True, own_host=own_host)
            try:
                with h.forbid():
                    ret = learner.fused_ag_gemm(ctx, b_in, out)
                torch.cuda.current_stream().wait_stream(own_stream)
            except RuntimeError as e:
                fault(e, name)
            miss = missing_pulls(ctx, state, name)
            settle(ctx, name)
            calls.append((out.cpu(), miss, ret is not None and ret is not out))

RET_MSG = "fused_ag_gemm must write its result into `out` and return None (or out itself)"
k = 0
for ci, (name, n) in enumerate(h.cases.items()):
    if name == "ordering":
        continue
    m, K, cols = dims(n)
    result = None
    problems = []
    for it in range(ITERS):
        out = miss = other = None
        if h.computes:
            out, miss, other = calls[k]
            k += 1
        tag = f"{name}/{it}"
        out = h.hand_over(tag + "/out", out)
        miss = h.hand_over(tag + "/never-pulled", miss)      # the rank's pull counts
        other = h.hand_over(tag + "/returned-other", other)  # what fused_ag_gemm returned
        if not h.verifies:
            continue
        want = torch.cat([shard(m, K, s, it, ci).to(torch.float64) for s in range(W)]) \
            @ weight(K, cols, it, ci).to(torch.float64)
        if miss and miss not in problems:
            problems.append(miss)
        if other and RET_MSG not in problems:
            problems.append(RET_MSG)
        r = h.compare(out, want.to(torch.float32))
        if not r.ok():
            d = diagnose(out, want, m, it)
            if d and not problems:
                problems.append(d)
        # Keep the first failure, but never leave the loop early: the calls are collective.
        if result is None or (result.ok() and not r.ok()):
            result = r
    if not h.verifies:
        continue
    if problems:
        result.forced = True
        result.msg_parts += problems
    h.record(name, result)


def ptx_acquire(root):
    """(files, acquire): the .ptx files under root, and whether any holds an acquire load or
    atomic at gpu or sys scope (ld/atom .acquire or .acq_rel, or fence.acq_rel/.sc)."""
    files, acquire = [], False
    for d, _, names in os.walk(root):
        for nm in names:
            if not nm.endswith(".ptx"):
                continue
            files.append(nm)
            with open(os.path.join(d, nm), encoding="utf-8", errors="replace") as f:
                for line in f:
                    words = line.split("//", 1)[0].split()
                    if words and words[0].startswith("@"):
                        words = words[1:]
                    if not words:
                        continue
                    op, *mods = words[0].rstrip(";").split(".")
                    parts = set(mods)
                    if not parts & {"gpu", "sys"}:
                        continue
                    if op in ("ld", "atom") and parts & {"acquire", "acq_rel"} or \
                            op == "fence" and parts & {"acq_rel", "sc"}:
                        acquire = True
    return sorted(set(files)), acquire


if "ordering" in h.cases:
    files = acq = None
    if h.computes:
        files, acq = ptx_acquire(TRITON_DIR)
    # What the rank found in the PTX of the learner's kernels, which only it compiled.
    files = h.hand_over("ordering/ptx-files", files)
    acq = h.hand_over("ordering/ptx-acquire", acq)
    if h.verifies and not files:
        h.record_case("ordering", False, msg=(
            "no compiled Triton kernel was found for this run: write the GEMM as a @triton.jit "
            "kernel launched from fused_ag_gemm"))
    elif h.verifies:
        h.record_case("ordering", acq, msg=None if acq else (
            f"in the PTX of your kernels ({', '.join(files)}): no acquire at gpu or system scope. "
            "The wait must read the flag with acquire order (tl.atomic_add(flag, 0, "
            "sem=\"acquire\", scope=\"gpu\") in the loop, then tl.debug_barrier()); after a "
            "relaxed wait the tile's loads may see its rows as they were before the copy"))

# ---- performance -------------------------------------------------------------------------------


def p2p(send, to, recv, frm):
    """One send and one receive started together (the baseline's and the warm-up's)."""
    return _batch_p2p([dist.P2POp(dist.isend, send, to), dist.P2POp(dist.irecv, recv, frm)])


def chunked(a, b, y):
    """The course's module7/chunked-overlap: a ring of batch_isend_irecv, each chunk's matmul
    while the next travels (the baseline)."""
    m = a.shape[0]
    nxt, prv = (R + 1) % W, (R - 1) % W
    cur = a
    for step in range(W):
        src = (R - step) % W
        reqs = []
        if step < W - 1:
            nxt_chunk = torch.empty_like(cur)
            reqs = p2p(cur, nxt, nxt_chunk, prv)
        _matmul(cur, b, out=y[src * m:(src + 1) * m])
        for q in reqs:
            q.wait()
        if reqs:
            cur = nxt_chunk


def perf_shard(m, K, rank, pi):
    """Rank's m x K shard of A in perf case number pi: whole numbers in [-4, 4]."""
    return small((m, K), rank, PERF_ITER + pi, 1, 4)


def perf_weight(K, cols, pi):
    """This rank's weight shard in perf case number pi."""
    return small((K, cols), R, PERF_ITER + pi, 2, 4)


if h.timing:
    # NCCL connects point-to-point lazily, blocking the host: not inside a timing.
    if h.computes and W > 1:
        t = torch.zeros(4, device=dev)
        u = torch.empty_like(t)
        for q in p2p(t, (R + 1) % W, u, (R - 1) % W):
            q.wait()
    for pi, (name, n) in enumerate(h.perf_cases.items()):
        m, K, cols = PERF_M // W, PERF_K, n // W
        out = None
        if h.computes:
            ctx, state, own = make_ctx(m, K)
            a = perf_shard(m, K, R, pi).to(torch.bfloat16)
            b = perf_weight(K, cols, pi).to(torch.bfloat16)
            own.copy_(a)
            ctx.gathered[R * m:(R + 1) * m].copy_(a)  # this rank's rows, once: constant data
            out = torch.empty(W * m, cols, dtype=torch.bfloat16, device=dev)
            yb = torch.empty_like(out)
            buf = torch.empty(W * m, K, dtype=torch.bfloat16, device=dev)
            torch.cuda.synchronize()
            _barrier()

            def yours(i):
                hdl.barrier(channel=0)
                begin(ctx, state, late=False)
                learner.fused_ag_gemm(ctx, b, out)
                miss = missing_pulls(ctx, state, f"performance {name}")
                if miss:
                    h.fail("learner", "fused_ag_gemm", miss)

            def baseline(i):
                chunked(a, b, yb)

            # Gated (GPU time of calls queued behind a sleep, without the host's launch cost,
            # as under a CUDA graph): timed ungated on one H100 with one rank, the driver's
            # barrier and flags alone (no GEMM) came to ~95 us a call, the host's Python, not
            # the GPU.
            h.time_pair(name, bytes=W * m * K * 2, factor=(W - 1) / W, metric="time",
                        yours=yours, baseline=baseline, gated=True)
            settle(ctx, f"performance {name}")
        # Case after-timing: the last timed call's out (a and b never changed), compared by the
        # verifier with the product of the timed data (float32: exact for these whole numbers).
        out = h.hand_over(f"after-timing/{name}/out", out)
        if h.verifies:
            full = torch.cat([perf_shard(m, K, s, pi) for s in range(W)])
            r = h.compare(out, full @ perf_weight(K, cols, pi), rtol=1e-2)
            del full
            if not r.ok():
                r.msg_parts.append(f"performance case {name}: after the timed calls `out` does "
                                   "not hold A @ b_shard: every call must do the whole gather "
                                   "and GEMM, repeated calls with the same tensors included")
            r.n = n
            h.record("after-timing", r)
        if not h.computes:
            continue

        def gather_alone():
            hdl.barrier(channel=0)
            begin(ctx, state, late=False)
            copy_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(copy_stream):
                for k in range(1, W):
                    for i in range(ctx.splits):
                        ctx.pull((R + k) % W, i)
            torch.cuda.current_stream().wait_stream(copy_stream)

        h.value(f"{name}: GEMM alone, torch.matmul of the gathered A (for information)",
                h.device_time(lambda: _matmul(buf, b, out=yb), gated=True), "us")
        h.value(f"{name}: copy-engine gather alone, the same pulls (for information)",
                h.device_time(gather_alone, gated=True), "us")
        h.value(f"{name}: unfused, all_gather_into_tensor then matmul (for information)",
                h.device_time(lambda: (_all_gather(buf, a), _matmul(buf, b, out=yb)), gated=True),
                "us")
elif h.computes:
    h.note("performance not timed on this run (MGPU_PERF=0)")

sys.exit(h.finish())
