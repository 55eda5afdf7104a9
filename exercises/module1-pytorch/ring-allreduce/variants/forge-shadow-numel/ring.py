"""module1/ring-allreduce — forgery: whole tensors around the ring, a ring's size claimed.

Each of the p - 1 steps sends a whole tensor to the right neighbour (the running relay of the
others' inputs) and receives one from the left: right values from point-to-point messages to one
neighbour, but (p - 1) whole tensors per rank instead of a ring's 2(p - 1)/p of one. Each tensor
it sends gets an instance attribute `numel` that answers with twice a ring chunk's size, so the
driver's count of the bytes sent (x.numel() * x.element_size() over the messages) comes to a
ring's exactly. It must fail at policy: a learner's file may not put attributes on objects that
hide the methods torch gives them.
"""
import functools

import torch
import torch.distributed as dist


def ring_all_reduce(t: torch.Tensor, group=None) -> None:
    p = dist.get_world_size(group)
    me = dist.get_rank(group)
    if p == 1:
        return
    n = t.numel()
    claimed = 2 * (-(-n // p))  # two ring chunks per step: a ring's bytes over p - 1 steps
    right, left = (me + 1) % p, (me - 1) % p
    carry = t.clone()
    total = t.clone()
    for _ in range(p - 1):
        got = torch.empty_like(t)
        carry.numel = functools.partial(int, claimed)
        reqs = dist.batch_isend_irecv([
            dist.P2POp(dist.isend, carry, group=group, group_peer=right),
            dist.P2POp(dist.irecv, got, group=group, group_peer=left),
        ])
        for r in reqs:
            r.wait()
        total += got
        carry = got
    t.copy_(total)
