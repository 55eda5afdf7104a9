"""module6/symm-mem — your file.

Write a one-shot all-reduce (sum) in Triton on PyTorch's symmetric memory. The driver calls

    one_shot_all_reduce(ctx, inp, out)

on every rank of a team at once, with `inp` and `out` contiguous float32 tensors of the same
n elements (1 <= n <= ctx.capacity) and `out` full of NaN. On return (in stream order) `out`
must hold, on every rank, the element-wise sum of `inp` over the team's ranks. TASK.md has the
whole contract; in short, `ctx` holds:

    ctx.rank, ctx.world       this rank's index in the team and the team's size
    ctx.buffer_ptrs           int64 tensor [world] on the GPU: address of rank p's slot
                              (float32, ctx.capacity elements, 16-byte aligned)
    ctx.signal_pad_ptrs       int64 tensor [world]: address of rank p's signal pad
                              (ctx.signal_words int32 words, all 0 before the first call)
    ctx.epoch                 1, 2, 3, ...: the number of this call, the same on every rank
    ctx.buffer                your own slot as a tensor (for debugging)

As shipped, the kernel copies `inp` into this rank's slot and stops there: nobody is told,
nobody waits, and `out` stays NaN, so every case fails.
"""
import torch
import triton
import triton.language as tl

BLOCK = 2048       # elements per tile
MAX_PROGRAMS = 24  # keep the grid small: each program signals and waits on its own words


@triton.jit
def _one_shot_kernel(inp_ptr, out_ptr, buf_ptrs, pad_ptrs, n, rank, world, epoch,
                     BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    lanes = tl.arange(0, BLOCK)

    # 1. Copy this rank's input into its own slot. An address from the table becomes a
    #    pointer with .to(tl.pointer_type(...)); tl.multiple_of tells Triton it is aligned.
    mine = tl.load(buf_ptrs + rank).to(tl.pointer_type(tl.float32))
    mine = tl.multiple_of(mine, 16)
    for start in range(pid * BLOCK, n, step):
        offs = start + lanes
        m = offs < n
        tl.store(mine + offs, tl.load(inp_ptr + offs, mask=m), mask=m)

    # 2. TODO: barrier with program `pid` of every rank of the team.
    #    - tl.debug_barrier(): every thread of this program is done with its stores;
    #    - signal: for each peer p, write a value for this epoch into a word of p's signal pad
    #      that belongs to (this program, this rank), with release order at system scope
    #      (tl.atomic_xchg(ptr, value, sem="release", scope="sys"));
    #    - wait: for each peer p, spin on the word of your own pad that p writes until it
    #      reaches the value (tl.atomic_add(ptr, 0, sem="acquire", scope="sys") reads it);
    #    - tl.debug_barrier() again before anyone loads a peer's slot.
    #    The pads are never reset: choose values that only grow from call to call.

    # 3. TODO: for your tiles, load the same offsets from every rank's slot (the table has
    #    ctx.world entries), sum them, store into out_ptr.

    # 4. TODO: barrier again (another value), so that no peer still reads your slot when
    #    this call returns: the next call (and the driver) may overwrite it then.


def one_shot_all_reduce(ctx, inp: torch.Tensor, out: torch.Tensor) -> None:
    n = inp.numel()
    grid = (min(triton.cdiv(n, BLOCK), MAX_PROGRAMS),)  # the same on every rank
    _one_shot_kernel[grid](inp, out, ctx.buffer_ptrs, ctx.signal_pad_ptrs, n, ctx.rank,
                           ctx.world, ctx.epoch, BLOCK=BLOCK, num_warps=8)
