"""Driver of module6/symm-mem (course-owned; the learner edits symm_allreduce.py).

The learner writes one_shot_all_reduce(ctx, inp, out) in Triton: copy `inp` into this rank's
slot of a symmetric buffer, signal every peer and wait for every peer's signal through the
signal pads, sum every rank's slot into `out`, and meet the peers once more before returning
so that the next call may reuse the slot. This driver allocates the symmetric memory with
PyTorch (torch.distributed._symmetric_memory, CUDA backend, multicast off), hands the learner
a SymmContext per team, checks every element exactly and times the call against PyTorch's own
one-shot kernel on the same sizes.

Teams. The whole job is one team. When the job has two ranks or more, ranks 1..world-1 form a
second team and rank 0 a third, each with symmetric memory of its own (rendezvous on a
new_group), so a kernel written for exactly two ranks, or for the job's own numbering, is
caught: with 2 GPUs both sub-teams have a single rank, with 4 GPUs one has three. The pointer
tables are surrounded by null entries (PTR_PAD on each side), so a kernel that reaches a rank
outside its team faults at once instead of reading a stranger's memory or waiting forever.

What each call must survive (the contract in task.md):
- the current stream is busy when the call is made: a ~100 us GPU sleep, then the inputs are
  written and the output poisoned with NaN, all on that stream. Work the learner launches on
  another stream without ordering it after the current one runs before the inputs exist;
- right after the call the driver refills this rank's own slot with NaN, in stream order. A
  kernel that returned while a peer was still reading that slot hands the peer NaN;
- case "reuse": calls back to back without any host synchronization, rank 0 arriving late
  each time (so its kernel finishes first) while rank 0 also pushes a 64 MiB copy into rank 1's
  scratch memory on another stream, which slows rank 1's reads of rank 0's slot over the same
  link. Without the final barrier rank 1 then reads rank 0's slot after rank 0 has refilled
  it. (Whether that is reliable on 2xH200 is to be confirmed: see the variant no-final-barrier.)
- case "ordering": the PTX of every Triton kernel the learner's code compiled (in a cache
  directory of this run, TRITON_CACHE_DIR) must hold a system-scope release and a
  system-scope acquire. A relaxed flag passes the data checks on most runs, so the memory
  order is checked where it is written down.

Integer-valued float32 data: sums are exact in any order, and every element must match.

The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier"): the rank hands over every checked
call's `out`, what case "ordering" found in its PTX, and after timing the last timed outputs
(its own and the baseline's); the verifier makes the sums over the team's ranks, which the
rank itself cannot make, compares and records the cases (also "after-timing").
"""
import os
import sys
import traceback

import torch
import torch.distributed as dist

import mgpu_harness

MAX_WORLD = 8         # the pointer tables and the signal words are sized for at most 8 ranks
PTR_PAD = 8           # null int64 entries on each side of each pointer table
WATCHDOG_S = 30.0     # a call not finished on the GPU after this is reported as a hang
SLEEP_CYCLES = 2_000_000  # torch.cuda._sleep before each checked call's copies: ~1 ms at ~2 GHz
REUSE_CALLS = 16      # back-to-back calls of case "reuse"
LATE_CYCLES = 40_000  # ~20 us: rank 0 arrives late to each call of case "reuse"
SCRATCH_BYTES = 64 << 20  # what rank 0 pushes to rank 1 per call of case "reuse"
LEARNER = "symm_allreduce.py"

h = mgpu_harness.init(
    default_cases={"ordering": 1, "one": 1, "4KiB": 1024, "odd": 4097, "64KiB": 16384,
                   "odd-big": 100003, "1MiB": 262144, "reuse": 262144, "sub-one": 1,
                   "sub-odd": 12347, "sub-64KiB": 16384},
    default_perf_cases={"4KiB": 1024, "64KiB": 16384, "1MiB": 262144})

if not h.on_gpu:
    h.fail("harness", "setup", "module6/symm-mem needs CUDA GPUs: symmetric memory and Triton "
           "kernels do not run on the CPU")
if h.world > MAX_WORLD:
    h.fail("harness", "setup", f"{h.world} ranks: this exercise supports at most {MAX_WORLD}")

# NVLink multicast stays off (the launcher sets this too); this process creates no
# multicast object, and the check after each rendezvous makes sure of it.
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
# The learner's Triton kernels compile into a directory of this process alone, so that the
# PTX read by case "ordering" is theirs and from this run (set before triton is imported).
TRITON_DIR = os.path.join(h.run_dir, f"triton-cache-rank{h.rank}-{os.getpid()}")
if h.computes:
    os.makedirs(TRITON_DIR, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = TRITON_DIR

learner = h.import_learner("symm_allreduce")  # None in the verifier
if h.computes:
    h.init_process_group()  # the verifier makes no process group

import torch.distributed._symmetric_memory as symm_mem  # noqa: E402  (after the process group)

dev = h.device
if h.computes:
    # The CUDA backend (VMM memory shared between the processes, no NVSHMEM) where this torch
    # has it by that name; torch 2.11 on the course's H100 said "SymmetricMemory does not find
    # allocation backend CUDA" to set_backend("CUDA"), and then its default backend is used.
    try:
        symm_mem.set_backend("CUDA")
    except RuntimeError:
        pass
    try:
        h.note(f"symmetric memory backend: {symm_mem.get_backend(dev)}")
    except Exception:  # older torch: no get_backend
        pass
NAN = float("nan")
_all_reduce = h.real("torch.distributed.all_reduce")
_barrier = h.real("torch.distributed.barrier")


class SymmContext:
    """What one_shot_all_reduce(ctx, inp, out) is given: one team's symmetric memory as this
    rank sees it. task.md documents every field."""

    def __init__(self, rank, world, buffer, buffer_ptrs, signal_pad_ptrs, signal_words):
        self.rank = rank                        # this rank's index in the team, 0..world-1
        self.world = world                      # ranks in the team
        self.buffer = buffer                    # this rank's slot: float32, capacity elements
        self.capacity = buffer.numel()
        self.buffer_ptrs = buffer_ptrs          # int64 [world] on the GPU: address of rank p's slot
        self.signal_pad_ptrs = signal_pad_ptrs  # int64 [world]: address of rank p's signal pad
        self.signal_words = signal_words        # int32 words in each signal pad, all 0 at first
        self.epoch = 0                          # 1, 2, 3, ...: the call's number, on every rank

    def __repr__(self):
        return (f"SymmContext(rank={self.rank}, world={self.world}, capacity={self.capacity}, "
                f"signal_words={self.signal_words}, epoch={self.epoch})")


def _table(addrs):
    """An int64 tensor of the addresses with PTR_PAD zeros before and after it: the view
    handed to the learner has exactly len(addrs) entries, and whatever lies outside is null."""
    t = torch.zeros(len(addrs) + 2 * PTR_PAD, dtype=torch.int64, device=dev)
    t[PTR_PAD:PTR_PAD + len(addrs)] = torch.tensor(addrs, dtype=torch.int64)
    return t[PTR_PAD:PTR_PAD + len(addrs)]


def _same_on_team(group, value, what):
    """Checks that an integer is the same on every rank of the group (setup only)."""
    t = torch.tensor([value, -value], dtype=torch.int64, device=dev)
    _all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    if t[0].item() != value or -t[1].item() != value:
        h.fail("harness", "symmetric memory", f"{what} differs between the ranks of a team "
               f"({value} here): the symmetric allocations are not symmetric")


def _symmetric(n, group, what):
    """symm_mem.empty + rendezvous on the group. Returns (tensor, handle, offset of the
    tensor in the handle's buffer, in bytes)."""
    t = symm_mem.empty(n, dtype=torch.float32, device=dev)
    hdl = symm_mem.rendezvous(t, group)
    if int(getattr(hdl, "multicast_ptr", 0) or 0) != 0:
        h.fail("harness", "symmetric memory", f"the {what} buffer came with an NVLink multicast "
               "mapping although TORCH_SYMM_MEM_DISABLE_MULTICAST=1: this course never uses "
               "multicast; stop and report it")
    off = t.data_ptr() - hdl.buffer_ptrs[hdl.rank]
    if off < 0 or off + 4 * n > hdl.buffer_size:
        h.fail("harness", "symmetric memory", f"the {what} tensor lies outside its handle's "
               f"buffer (offset {off}, {4 * n} bytes, buffer {hdl.buffer_size} bytes)")
    _same_on_team(group, off, f"the {what} tensor's offset in its buffer")
    return t, hdl, off


class Team:
    """One team's symmetric memory, the learner's context for it and the calls made with it.
    In the verifier (no process group, no memory) only the team's ranks, which the messages
    name and the expected sums are made of."""

    def __init__(self, group, ranks, capacity, label):
        self.group, self.ranks, self.label = group, ranks, label
        self.size = len(ranks)
        self.team_rank = ranks.index(h.rank)
        self.capacity = capacity
        self.calls = 0
        if not h.computes:
            return
        buf, hdl, off = _symmetric(capacity, group, f"{label} team's")
        if hdl.world_size != self.size or hdl.rank != dist.get_rank(group):
            h.fail("harness", "symmetric memory", f"rendezvous on the {label} team gave rank "
                   f"{hdl.rank} of {hdl.world_size}, expected {dist.get_rank(group)} of "
                   f"{self.size}")
        words = symm_mem.get_signal_pad_size() // 4
        hdl.get_signal_pad(hdl.rank, (words,), dtype=torch.int32).zero_()
        bufs = [b + off for b in hdl.buffer_ptrs]
        pads = list(hdl.signal_pad_ptrs)
        for a in bufs + pads:
            if a % 16:
                h.fail("harness", "symmetric memory", f"address {a:#x} is not 16-byte aligned")
        self.buf, self.hdl = buf, hdl
        self.ctx = SymmContext(hdl.rank, self.size, buf, _table(bufs), _table(pads), words)

    def describe(self):
        if self.size == h.world:
            return f"the whole job ({self.size} rank{'s' if self.size > 1 else ''})"
        return (f"a team of {self.size} rank{'s' if self.size > 1 else ''} (job ranks "
                f"{', '.join(map(str, self.ranks))}; this rank is team rank {self.team_rank})")

    def launch(self, inp, out):
        """One call of the learner's function, not policed (time_pair polices its samples).
        Returns the epoch of the call."""
        self.calls += 1
        self.ctx.epoch = self.calls
        learner.one_shot_all_reduce(self.ctx, inp, out)
        return self.calls

    def call(self, inp, out, case):
        """A checked call: policed, CUDA faults reported as the learner's, and this rank's slot
        refilled with NaN in stream order right after it."""
        try:
            with h.forbid():
                epoch = self.launch(inp, out)
            self.buf[:inp.numel()].fill_(NAN)  # (a fault of the kernel may surface here)
        except RuntimeError as e:
            self.fault(e, case, inp.numel())
        return epoch

    def settle(self, case, n):
        """Waits for the GPU with a watchdog: a hang or a fault becomes the learner's error."""
        try:
            done = h.wait_gpu(WATCHDOG_S)
        except RuntimeError as e:
            self.fault(e, case, n)
            return
        if not done:
            h.fail("learner", "one_shot_all_reduce",
                   f"case {case}: your kernel had not finished {WATCHDOG_S:.0f} s after "
                   f"call {self.calls} on {self.describe()}, {n} elements: a wait that "
                   "never ends. Does every rank signal every peer of the team, at the "
                   "word the peer polls, with the value it waits for in this epoch? "
                   "Does the grid have the same number of programs on every rank?")

    def fault(self, e, case, n):
        text = str(e)
        low = text.lower()
        if not any(w in low for w in ("illegal memory access", "illegal address",
                                      "unspecified launch failure", "misaligned address",
                                      "out of bounds", "invalid address")):
            raise e
        file, line = LEARNER, 0
        for fr in traceback.extract_tb(e.__traceback__):
            if os.path.basename(fr.filename) == LEARNER:
                line = fr.lineno
        first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
        h.fail("learner", "one_shot_all_reduce",
               f"case {case}: the GPU reported '{first}' after call {self.calls} on "
               f"{self.describe()}, {n} elements. ctx.buffer_ptrs and ctx.signal_pad_ptrs have "
               f"exactly ctx.world entries and every address around them is null here, so a "
               "kernel that reaches a rank outside the team (a world fixed at 2, peer = 1 - "
               "rank, the job's rank instead of ctx.rank) faults. Loop over range(ctx.world) "
               "and index with ctx.rank", file, line)


def explain(r, team, n, it, extra=""):
    """What a failed comparison most likely means, appended to its record."""
    where = f"{team.describe()}, {n} elements, iteration {it}"
    if r.unwritten:
        lead = (f"none of the {n} elements of `out` was written" if r.unwritten >= n else
                f"{r.unwritten} of {n} elements are NaN")
        r.msg_parts.append(
            f"{lead} after your call ({where}). The driver "
            "fills `out` with NaN before each call and refills this rank's own slot with NaN "
            "right after it returns. So: an element your kernel never wrote (grid or mask too "
            "small), work launched on another stream than torch.cuda.current_stream() (the "
            "driver keeps that stream busy before each call, so such work runs before the "
            "inputs are written and is then overwritten), or a peer's slot read after that "
            "peer had returned (a missing final barrier)" + extra)
    # Rounding one input of magnitude below 65 to float16 moves it by 1/32 at most, to
    # bfloat16 by 1/8; a read at the wrong time moves an element by a whole input, almost always.
    if r.bad and 0 < r.max_abs <= 0.125 * team.size:
        r.msg_parts.append(
            f"{r.bad} of {n} elements are within a rounding of the sum over the team's "
            f"{team.size} ranks, but not it ({where}; largest error {r.max_abs:.3g}): "
            "the data passed through a type narrower than float32 (float16 or bfloat16 in a "
            "slot, to move half the bytes?) or was added in one. The inputs have 13 "
            "significant bits, float16 keeps 11: store, load and add them as float32" + extra)
    elif r.bad:
        r.msg_parts.append(
            f"{r.bad} of {n} elements are not the sum over the team's {team.size} ranks "
            f"({where}). A value that misses a peer's share, or holds a stale one, comes from "
            "reading a slot before its owner had written it (signal only after the copy, with "
            "release at system scope; wait with acquire at system scope), from a slot that was "
            "overwritten while it was read (a missing final barrier), or from work on another "
            "stream than torch.cuda.current_stream(), which ran before the inputs were "
            "written" + extra)


# ---- teams -------------------------------------------------------------------------------------

sub_cases = {k: v for k, v in h.cases.items() if k.startswith("sub-")}
# (The sub- cases run on the whole job when it has one rank: its buffer must hold them too.)
cap_full = max(list(h.cases.values()) + list(h.perf_cases.values()) + [1])
cap_sub = max(list(sub_cases.values()) + [1])

world_group = dist.group.WORLD if h.computes else None
full = Team(world_group, list(range(h.world)), cap_full, "whole-job")
if h.world > 1:
    rest = list(range(1, h.world))
    g_rest = g_zero = None
    if h.computes:
        g_rest = dist.new_group(rest)
        g_zero = dist.new_group([0])
    if h.rank == 0:
        sub = Team(g_zero, [0], cap_sub, "rank-0")
    else:
        sub = Team(g_rest, rest, cap_sub, "ranks-1+")
else:
    sub = full  # a one-rank job has no smaller team: the sub- cases run on the whole job

if h.computes:
    # Scratch for case "reuse": rank 0 writes into rank 1's copy to load the link 0 -> 1.
    scratch_elems = SCRATCH_BYTES // 4
    scratch, scratch_hdl, scratch_off = _symmetric(scratch_elems, world_group, "scratch")
    torch.cuda.synchronize()
    _barrier()

# ---- correctness -------------------------------------------------------------------------------
# The rank calls and hands every checked `out` over ("<case>/<k>/out"); the verifier compares.

for ci, (name, n) in enumerate(h.cases.items()):
    if name == "ordering":
        continue
    team = sub if name.startswith("sub-") else full
    if n > team.capacity:
        h.fail("driver", "cases",
               f"case {name}: {n} elements exceed the buffer's {team.capacity}")
    if name == "reuse":
        # Back to back, no host synchronization: every input made first, every output
        # checked after the last call.
        outs = [None] * REUSE_CALLS
        if h.computes:
            inps = [h.exact(n, iter=1000 * ci + k, fine=True) for k in range(REUSE_CALLS)]
            outs = [torch.full((n,), NAN, dtype=torch.float32, device=dev)
                    for _ in range(REUSE_CALLS)]
            side = torch.cuda.Stream()
            peer_scratch = None
            if h.rank == 0 and h.world > 1:
                peer_scratch = scratch_hdl.get_buffer(1, (scratch_elems,), torch.float32,
                                                      scratch_off // 4)
            torch.cuda.synchronize()
            _barrier()
            for k in range(REUSE_CALLS):
                if peer_scratch is not None:
                    try:  # (a fault of the previous call's kernel may surface here)
                        with torch.cuda.stream(side):
                            peer_scratch.copy_(scratch, non_blocking=True)
                        torch.cuda._sleep(LATE_CYCLES)
                    except RuntimeError as e:
                        team.fault(e, name, n)
                team.call(inps[k], outs[k], name)
            team.settle(name, n)
        result = None
        for k in range(REUSE_CALLS):
            out = h.hand_over(f"{name}/{k}/out", outs[k])
            if not h.verifies:
                continue
            want = h.exact_sum(n, iter=1000 * ci + k, ranks=team.ranks, device=out.device, fine=True)
            r = h.compare(out, want)
            if not r.ok():
                explain(r, team, n, k, extra=(
                    f". These were {REUSE_CALLS} calls back to back with rank 0 arriving last "
                    "to each: a rank whose kernel ends while a peer still reads its slot lets "
                    "the driver's NaN refill (and its next call's copy) into the peer's sum; "
                    "the final barrier must keep every rank in the call until every peer has "
                    "finished reading its slot"))
            if result is None or result.ok():
                result = r
        if h.verifies:
            h.record(name, result)
        continue
    iters = 12 if n <= 65536 else 4
    result = None
    for it in range(iters):
        key = 1000 * ci + it
        out = None
        if h.computes:
            # The data is made first (a dozen small kernels, each a launch of host time), then
            # the stream is kept busy and the copies into inp and out are queued behind the
            # sleep: when the call is made, the current stream has not written inp yet, so a
            # kernel on another stream reads the previous contents (measured on an H100: with
            # the sleep queued before making the data, the host's own launches used it up and
            # side-stream passed).
            src = h.exact(n, iter=key, fine=True)
            inp = torch.empty_like(src)
            out = torch.empty((n,), dtype=torch.float32, device=dev)
            torch.cuda._sleep(SLEEP_CYCLES)
            inp.copy_(src)
            out.fill_(NAN)
            team.call(inp, out, name)
            team.settle(name, n)
        out = h.hand_over(f"{name}/{it}/out", out)
        if not h.verifies:
            continue  # the call is collective: the rank never leaves the loop early
        want = h.exact_sum(n, iter=key, ranks=team.ranks, device=out.device, fine=True)
        r = h.compare(out, want)
        if not r.ok():
            explain(r, team, n, it)
        # Keep the first failure, but never leave the loop early: the call is collective.
        if result is None or result.ok():
            result = r
    if h.verifies:
        h.record(name, result)


def ptx_orders(root):
    """(files, release, acquire): the .ptx files under root, and whether any holds a
    system-scope release (atom/red/st .release or .acq_rel at .sys, or fence.acq_rel/.sc.sys,
    membar.sys) and a system-scope acquire (ld/atom .acquire or .acq_rel at .sys, or such a
    fence)."""
    files, release, acquire = [], False, False
    for d, _, names in os.walk(root):
        for nm in names:
            if not nm.endswith(".ptx"):
                continue
            files.append(nm)
            with open(os.path.join(d, nm), encoding="utf-8", errors="replace") as f:
                for line in f:
                    words = line.split("//", 1)[0].split()
                    if words and words[0].startswith("@"):  # a predicate: @%p1 or @!%p1
                        words = words[1:]
                    if not words:
                        continue
                    op, *mods = words[0].rstrip(";").split(".")
                    parts = set(mods)
                    if "sys" not in parts:
                        continue
                    fence = op == "membar" or (op == "fence" and parts & {"acq_rel", "sc"})
                    if fence or (op in ("atom", "red", "st") and parts & {"release", "acq_rel"}):
                        release = True
                    if fence or (op in ("atom", "ld") and parts & {"acquire", "acq_rel"}):
                        acquire = True
    return sorted(set(files)), release, acquire


if "ordering" in h.cases:
    # What the rank's own compiled PTX holds is a fact only the rank can see: it hands it over.
    ptx = None
    if h.computes:
        files, rel, acq = ptx_orders(TRITON_DIR)
        ptx = {"files": files, "release": rel, "acquire": acq}
    ptx = h.hand_over("ordering/ptx", ptx)
    if h.verifies:
        files, rel, acq = ptx["files"], ptx["release"], ptx["acquire"]
        if not files:
            h.record_case("ordering", False, msg=(
                "no compiled Triton kernel was found for this run: write the all-reduce as a "
                "@triton.jit kernel launched from one_shot_all_reduce"))
        else:
            missing = []
            if not rel:
                missing.append(
                    "no system-scope release: the signal must be written with release order at "
                    "system scope (tl.atomic_xchg(flag, value, sem=\"release\", scope=\"sys\"), "
                    "after tl.debug_barrier()); a relaxed flag, or one at the default \"gpu\" "
                    "scope, may reach the peer before the data it announces")
            if not acq:
                missing.append(
                    "no system-scope acquire: the wait must read the flag with acquire order at "
                    "system scope (tl.atomic_add(flag, 0, sem=\"acquire\", scope=\"sys\") in "
                    "the loop, then tl.debug_barrier()); after a relaxed wait the loads that "
                    "follow may see the peer's slot as it was before")
            h.record_case("ordering", not missing, msg=(
                f"in the PTX of your kernels ({', '.join(files)}): " + "; ".join(missing))
                if missing else None)

# ---- performance -------------------------------------------------------------------------------
# Probes of the timed calls: between them neither `inp` nor `out` changes, so a kernel that
# skipped its work whenever `out` already held numbers would be right at the one check after
# timing and fast when timed. About one call in PROBE_EVERY, drawn alike on every rank from a
# key rank 0 hands out, yours and the baseline's: before it one rank drawn at random adds small
# integers to its `inp` at PROBE_LANES random places, and every rank adds the same to its
# reference (the baseline's sum of the starting inputs); after it, `out` must match the
# reference there. Only the drawn rank's memory changed, so another rank cannot tell that
# this call counts without asking it. The mismatches are counted on the GPU.
# After each timed size the inputs are made again, one more call of each side runs untimed
# (nothing poisoned first), and the rank hands over that `out` and the baseline's
# ("after-timing/<size>/out", ".../baseline") and the probes' tallies (".../probes"); the
# verifier checks them: a wrong `out` or a missed probe fails the case "after-timing", a wrong
# baseline stops the run (the timing is not trusted).

PROBE_EVERY, PROBE_LANES, PROBE_SETS = 16, 32, 64
_M64 = (1 << 64) - 1


def _mix64(x):
    """splitmix64, on Python ints."""
    z = (x + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class Probes:
    def __init__(self, key, n, inp, ref):
        self.key, self.inp, self.ref, self.calls = key, inp, ref, 0
        g = torch.Generator()
        g.manual_seed(key & ((1 << 62) - 1))
        k = min(PROBE_LANES, n)
        # Places may repeat within a set: index_add_ adds twice to inp and to ref alike.
        self.idx = [torch.randint(0, n, (k,), generator=g).to(dev) for _ in range(PROBE_SETS)]
        self.delta = [((torch.randint(1, 65, (k,), generator=g)) *
                       (torch.randint(0, 2, (k,), generator=g) * 2 - 1)).to(torch.float32).to(dev)
                      for _ in range(PROBE_SETS)]
        self.bad = torch.zeros(2, dtype=torch.int64, device=dev)
        self.probed = [0, 0]

    def before(self):
        """The next op's draw: the set it is probed with, or None."""
        self.calls += 1
        x = _mix64(self.key ^ self.calls)
        if x % PROBE_EVERY:
            return None
        j = (x >> 8) % PROBE_SETS
        self.ref.index_add_(0, self.idx[j], self.delta[j])
        if (x >> 16) % h.world == h.rank:
            self.inp.index_add_(0, self.idx[j], self.delta[j])
        return j

    def after(self, j, out, which):
        if j is None:
            return
        i = self.idx[j]
        self.bad[which] += (out[i] != self.ref[i]).sum()
        self.probed[which] += 1

    def tallies(self):
        b = self.bad.tolist()
        return torch.tensor([b[0], self.probed[0], b[1], self.probed[1]], dtype=torch.int64)


AFTER_TIMING = ("after the timed calls `out` does not hold the sum over ranks: every call must "
                "do the whole all-reduce, repeated calls with the same tensors included")

if h.timing:
    if h.computes:
        cap_base = max(list(h.perf_cases.values()) + [1])
        base_buf, _, _ = _symmetric(cap_base, world_group, "baseline's")
        base_op = h.real("torch.ops.symm_mem.one_shot_all_reduce_copy_out")
        gname = world_group.group_name
        torch.cuda.synchronize()
        _barrier()
    after = None
    for pi, (name, n) in enumerate(h.perf_cases.items()):
        out = bout = None
        tallies = torch.zeros(4, dtype=torch.int64)
        if h.computes:
            inp = h.exact(n, iter=900000 + pi, fine=True)
            out = torch.full((n,), NAN, dtype=torch.float32, device=dev)
            bout = torch.full((n,), NAN, dtype=torch.float32, device=dev)
            bview = base_buf[:n]
            ref = torch.full((n,), NAN, dtype=torch.float32, device=dev)
            base_op(bview, inp, "sum", gname, ref)
            key = torch.tensor([int.from_bytes(os.urandom(7), "little") if h.rank == 0 else 0],
                               dtype=torch.int64, device=dev)
            _all_reduce(key, op=dist.ReduceOp.MAX, group=world_group)
            probes = Probes(int(key.item()), n, inp, ref)

            def yours(i):
                j = probes.before()
                full.launch(inp, out)
                probes.after(j, out, 0)

            def baseline(i):
                j = probes.before()
                base_op(bview, inp, "sum", gname, bout)
                probes.after(j, bout, 1)

            # Target: within 1.1x of PyTorch's kernel at <= 64 KiB (min_ratio 0.909, to be
            # confirmed on 2xH200). Both sides copy the input into symmetric memory themselves.
            # Gated: the GPU's time for the calls back to back, without the host's launch cost
            # (tensor-parallel decoding runs these under CUDA graphs). Measured on one H100
            # with one rank, ungated: Triton's launcher made the reference 29.8 us against
            # 10.9 us for PyTorch's op, a comparison of Python launch paths rather than of
            # kernels.
            h.time_pair(name, bytes=4 * n, factor=1.0, metric="time",
                        yours=yours, baseline=baseline, gated=True)
            full.settle(name, n)
            tallies = probes.tallies()
            # The starting inputs again, and one more call of each, as the timed ones ran.
            inp.copy_(h.exact(n, iter=900000 + pi, fine=True))
            with h.forbid():
                full.launch(inp, out)
            base_op(bview, inp, "sum", gname, bout)
            full.settle(name, n)
        out = h.hand_over(f"after-timing/{name}/out", out)
        bout = h.hand_over(f"after-timing/{name}/baseline", bout)
        tallies = h.hand_over(f"after-timing/{name}/probes", tallies)
        if h.verifies:
            want = h.exact_sum(n, iter=900000 + pi, device=out.device, fine=True)
            r = h.compare(out, want)
            if not r.ok():
                r.msg_parts.append(f"performance case {name}, {n} elements: {AFTER_TIMING}")
            bad, probed, bbad, bprobed = (int(x) for x in tallies.tolist())
            r.checked += probed * min(PROBE_LANES, n)
            if bbad:
                h.fail("harness", "probe", f"performance case {name}: a probe of the timed calls "
                       f"found {bbad} wrong places in PyTorch's output over {bprobed} probed calls: "
                       "the probe is wrong, not your code (a course bug)")
            if bad:
                r.forced = True
                r.bad += bad
                r.msg_parts.append(
                    f"performance case {name}: {bad} of the places probed in {probed} timed "
                    f"calls were wrong: a timed call left `out` behind. Before some timed calls "
                    "the driver changes one rank's `inp` at a few places, and only that rank "
                    "knows: every call must copy and read every rank's current input and write "
                    "all of `out`, even when `out` already holds a result")
            if after is None or after.ok():
                after = r
            if not h.compare(bout, want).ok():
                h.fail("harness", "baseline", f"performance case {name}: PyTorch's "
                       "one_shot_all_reduce_copy_out gave a wrong sum; the timing is not "
                       "trusted")
        if h.computes:
            t = torch.zeros(n, dtype=torch.float32, device=dev)  # its values do not matter
            h.value(f"NCCL all_reduce, {name} (for information)",
                    h.device_time(lambda: _all_reduce(t), iters=50, samples=7), "us")
    if h.verifies and after is not None:
        h.record("after-timing", after)
elif h.computes:
    h.note("performance not timed on this run (MGPU_PERF=0)")

sys.exit(h.finish())
