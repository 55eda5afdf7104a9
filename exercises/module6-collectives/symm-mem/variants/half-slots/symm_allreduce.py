"""module6/symm-mem, variant half-slots: the reference solution, except that each rank stores its
input into its symmetric slot as float16 and the peers read half the bytes, widening as they
add. Integer inputs in [-64, 64] (and so this sum over a few ranks) are float16 exactly, so it
passed; the driver's inputs now have 13 significant bits.

One Triton kernel per call. Program b of every rank owns the tiles b, b + G, b + 2G, ... of the
tensor (G programs, the same G on every rank because it depends on n alone):

  1. copy those tiles of `inp` into this rank's symmetric slot;
  2. barrier with program b of every rank (flag value 2*epoch - 1): after it, the same tiles
     of every peer's slot hold that peer's input;
  3. sum the tiles over all slots into `out`;
  4. barrier again (flag value 2*epoch): after it, no program b anywhere still reads this
     rank's tiles, so the next call may overwrite them.

Flags: the signal pad of rank r holds one int32 word per (program, peer), at program * world +
peer. Program b of rank q writes the value of the current barrier into word b * world + q of
every pad. Values only grow (1, 2, 3, 4, ... over the calls), so nothing is ever reset, and a
waiter accepts any value at or above the one it waits for: a fast peer may already have moved
on to the next barrier.
"""
import torch
import triton
import triton.language as tl

BLOCK = 2048       # elements per tile (and per program and loop step)
MAX_PROGRAMS = 24  # signal words used: MAX_PROGRAMS * world, far below the pad's size


@triton.jit
def _barrier(pad_ptrs, slot, rank, world, value):
    """Program `slot` of this rank meets program `slot` of every rank of the team."""
    # Every thread of the program is done with its loads and stores before anyone is told.
    tl.debug_barrier()
    # One thread per program writes the flags (Triton predicates scalar atomics that way).
    # Release at system scope: a peer that sees the value also sees what this program (and,
    # through the barrier above, all of its threads) wrote before.
    for p in range(world):
        peer_pad = tl.load(pad_ptrs + p).to(tl.pointer_type(tl.int32))
        tl.atomic_xchg(peer_pad + slot * world + rank, value, sem="release", scope="sys")
    # Acquire at system scope: what the peer wrote before its release is visible after this.
    # (An atomic add of 0 with acquire is a plain ld.acquire.sys on NVIDIA GPUs.)
    my_pad = tl.load(pad_ptrs + rank).to(tl.pointer_type(tl.int32))
    for p in range(world):
        flag = my_pad + slot * world + p
        seen = tl.atomic_add(flag, 0, sem="acquire", scope="sys")
        while seen < value:
            seen = tl.atomic_add(flag, 0, sem="acquire", scope="sys")
    # The other threads of the program start loading only after the wait is over.
    tl.debug_barrier()


@triton.jit(do_not_specialize=["epoch"])
def _one_shot_kernel(inp_ptr, out_ptr, buf_ptrs, pad_ptrs, n, rank, world, epoch,
                     BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    lanes = tl.arange(0, BLOCK)

    # 1. This rank's input into its own slot (a local copy: peers will read it from here).
    mine = tl.load(buf_ptrs + rank).to(tl.pointer_type(tl.float16))
    mine = tl.multiple_of(mine, 16)
    for start in range(pid * BLOCK, n, step):
        offs = start + lanes
        m = offs < n
        tl.store(mine + offs, tl.load(inp_ptr + offs, mask=m).to(tl.float16), mask=m)

    # 2. Every slot's tiles of this program are written.
    _barrier(pad_ptrs, pid, rank, world, 2 * epoch - 1)

    # 3. Sum over the team, each rank starting with a different peer so that the reads of
    #    the ranks spread over the links instead of all hitting rank 0 first.
    for start in range(pid * BLOCK, n, step):
        offs = start + lanes
        m = offs < n
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(world):
            q = (rank + i) % world
            src = tl.load(buf_ptrs + q).to(tl.pointer_type(tl.float16))
            src = tl.multiple_of(src, 16)
            acc += tl.load(src + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, acc, mask=m)

    # 4. Nobody reads this rank's tiles any more once this returns.
    _barrier(pad_ptrs, pid, rank, world, 2 * epoch)


def one_shot_all_reduce(ctx, inp: torch.Tensor, out: torch.Tensor) -> None:
    n = inp.numel()
    grid = (min(triton.cdiv(n, BLOCK), MAX_PROGRAMS),)
    # Launched on torch's current stream (Triton's default), after the driver's work that
    # wrote `inp` and before its work that reads `out`.
    _one_shot_kernel[grid](inp, out, ctx.buffer_ptrs, ctx.signal_pad_ptrs, n, ctx.rank,
                           ctx.world, ctx.epoch, BLOCK=BLOCK, num_warps=8)
