"""module1/ring-allreduce — forgery: the sum made after ring_all_reduce has returned (late methods).

The ring's messages go out as the reference sends them (the same bytes, to the right neighbour
only), but nothing is added. Before returning, the tensor gets instance attributes that shadow
its methods (detach, to, clone, ...): the first time the driver calls one of them, after the
call and outside the block where forbidden calls are policed, the tensor gets its first values
back and dist.all_reduce sums it. It passed before the harness's run-time rules against it,
and must fail at policy. It is caught where it sets the attribute (no instance attribute may hide
a tensor's method); were that missed, the all-reduce, made with learner code on the stack outside
the policed block, is refused too.
"""
import functools

import torch
import torch.distributed as dist



def _late(t, first, group, method, *args, **kwargs):
    del t.detach, t.to, t.cpu, t.clone, t.contiguous, t.numel
    t.copy_(first)
    dist.all_reduce(t, group=group)
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


def ring_all_reduce(t: torch.Tensor, group=None) -> None:
    p = dist.get_world_size(group)
    me = dist.get_rank(group)
    if p == 1:
        return
    first = t.clone()
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
    t.detach = functools.partial(_late, t, first, group, torch.Tensor.detach)
    t.to = functools.partial(_late, t, first, group, torch.Tensor.to)
    t.cpu = functools.partial(_late, t, first, group, torch.Tensor.cpu)
    t.clone = functools.partial(_late, t, first, group, torch.Tensor.clone)
    t.contiguous = functools.partial(_late, t, first, group, torch.Tensor.contiguous)
    t.numel = functools.partial(_late, t, first, group, torch.Tensor.numel)
