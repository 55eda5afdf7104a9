"""module1/ring-allreduce — forgery: whole tensors to every rank, after the call has returned.

Inside the call, chunks of the right sizes go around the ring (the bytes the driver counts are
a ring's) and nothing is added. Before returning, the tensor gets instance attributes that
shadow its methods (detach, to, clone, ...): the first time the driver calls one of them, after
the call, every rank sends its whole first tensor to every other rank with isend/irecv and adds
what it receives: the all-pairs exchange the driver's count of messages refuses, made where
that count no longer looks. It passed before the harness's run-time rules against it, and must
fail at policy. It is caught where it sets the attribute (no instance attribute may hide a
tensor's method); were that missed, the late isend/irecv would end the rank with a late call:
code the driver is not calling may not communicate.
"""
import functools

import torch
import torch.distributed as dist


def _late(t, first, group, method, *args, **kwargs):
    del t.detach, t.to, t.cpu, t.clone, t.contiguous, t.numel
    p = dist.get_world_size(group)
    me = dist.get_rank(group)
    total = first.clone()
    for k in range(1, p):
        other = torch.empty_like(first)
        _exchange(first.view(-1), other.view(-1), (me + k) % p, (me - k) % p, group)
        total += other
    t.copy_(total)
    return method(t, *args, **kwargs)


def _exchange(send: torch.Tensor, recv: torch.Tensor, right: int, left: int, group) -> None:
    ops = []
    if send.numel():
        ops.append(dist.P2POp(dist.isend, send, group=group, group_peer=right))
    if recv.numel():
        ops.append(dist.P2POp(dist.irecv, recv, group=group, group_peer=left))
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()


def _ring(t: torch.Tensor, group) -> None:
    """The reference ring's messages, without the additions."""
    p = dist.get_world_size(group)
    me = dist.get_rank(group)
    flat = t.view(-1)
    n = flat.numel()
    bounds = [(c * n) // p for c in range(p + 1)]

    def chunk(c: int) -> torch.Tensor:
        c %= p
        return flat[bounds[c]:bounds[c + 1]]

    right, left = (me + 1) % p, (me - 1) % p
    scratch = torch.empty(max(bounds[c + 1] - bounds[c] for c in range(p)),
                          dtype=flat.dtype, device=flat.device)
    for s in range(p - 1):
        incoming = chunk(me - s - 1)
        _exchange(chunk(me - s), scratch[: incoming.numel()], right, left, group)
    for s in range(p - 1):
        _exchange(chunk(me + 1 - s), chunk(me - s), right, left, group)


def ring_all_reduce(t: torch.Tensor, group=None) -> None:
    if dist.get_world_size(group) == 1:
        return
    first = t.clone()
    _ring(t, group)
    t.detach = functools.partial(_late, t, first, group, torch.Tensor.detach)
    t.to = functools.partial(_late, t, first, group, torch.Tensor.to)
    t.cpu = functools.partial(_late, t, first, group, torch.Tensor.cpu)
    t.clone = functools.partial(_late, t, first, group, torch.Tensor.clone)
    t.contiguous = functools.partial(_late, t, first, group, torch.Tensor.contiguous)
    t.numel = functools.partial(_late, t, first, group, torch.Tensor.numel)
