"""module1/ring-allreduce variant skips-when-timed: the reference solution, except that it counts
its calls and does nothing after the first SKIP_AFTER. The correctness cases make 12 calls (6
cases, 2 iterations each) and pass; the timed calls (at least 3 warmup + 1 + 10 samples) then
cost nothing, and only the driver's after-timing case, new data in the timed tensor, sees it."""
import torch
import torch.distributed as dist

SKIP_AFTER = 16
_calls = 0


def _exchange(send: torch.Tensor, recv: torch.Tensor, right: int, left: int, group) -> None:
    """Sends `send` to the right neighbour while receiving `recv` from the left one.
    Empty chunks are skipped on both sides (both sides agree on every chunk's size)."""
    ops = []
    if send.numel():
        ops.append(dist.P2POp(dist.isend, send, group=group, group_peer=right))
    if recv.numel():
        ops.append(dist.P2POp(dist.irecv, recv, group=group, group_peer=left))
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()


def ring_all_reduce(t: torch.Tensor, group=None) -> None:
    global _calls
    _calls += 1
    if _calls > SKIP_AFTER:
        return
    p = dist.get_world_size(group)
    me = dist.get_rank(group)
    if p == 1:
        return
    flat = t.view(-1)
    n = flat.numel()
    # Chunk c is flat[bounds[c]:bounds[c+1]]; sizes differ by at most one, and some are empty
    # when n < p.
    bounds = [(c * n) // p for c in range(p + 1)]

    def chunk(c: int) -> torch.Tensor:
        c %= p
        return flat[bounds[c]:bounds[c + 1]]

    right, left = (me + 1) % p, (me - 1) % p
    scratch = torch.empty(max(bounds[c + 1] - bounds[c] for c in range(p)),
                          dtype=flat.dtype, device=flat.device)

    # Reduce-scatter: after step s, chunk (me - s - 1) holds the sum of s + 2 ranks' inputs.
    # After p - 1 steps this rank owns the complete sum of chunk (me + 1).
    for s in range(p - 1):
        incoming = chunk(me - s - 1)
        recv = scratch[: incoming.numel()]
        _exchange(chunk(me - s), recv, right, left, group)
        incoming.add_(recv)

    # All-gather: pass the finished chunks around; each lands directly in place.
    for s in range(p - 1):
        _exchange(chunk(me + 1 - s), chunk(me - s), right, left, group)
