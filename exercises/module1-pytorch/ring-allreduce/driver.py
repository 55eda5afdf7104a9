"""Driver of module1/ring-allreduce (course-owned; the learner edits ring.py).

ring_all_reduce(t, group) must leave in t, on every rank of the group, the element-wise sum over
the group's ranks, using point-to-point messages only (the collectives that would do the work
are forbidden: MGPU_FORBID, and the same methods of the backend object, which the driver adds).
Cases are element counts of float32 tensors; a case whose name starts with "sub-" runs on the
group of ranks 1..world-1 (3 ranks when the job has 4), so the ring is also checked at an odd
number of ranks, and on a group whose ranks are not numbered as in the job (group rank 0 is
job rank 1): code that mixes the two numberings fails. Rank 0 runs it on a group of one.
Inputs are multiples of 1/64 with up to 13 significant bits (h.exact(..., fine=True)): sums are
exact in any order and the comparison uses tolerance 0, and a ring that sends float16 fails.

The bytes each rank sends are counted where every send ends (ProcessGroup.send): a ring sends
2 (p-1) chunks of at most ceil(n/p) elements, all to its right neighbour, in the tensor's own
dtype; sending whole tensors to every peer is not a ring, however packed.
Fewer than n elements cannot be right either (each rank must send each of its values at least
once): the sum then came from a collective through a route that is not policed.

Performance (GPU): busbw of ring_all_reduce against dist.all_reduce on the same size, ABAB.
Then "after-timing": new data in the timed tensor, one more call, checked, so a ring that stops
working after its first calls (when timed) fails.

The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier").
"""
import sys

import torch.distributed as dist

import mgpu_harness

h = mgpu_harness.init(default_cases={"tiny": 5, "one": 1, "odd": 100003, "sub-odd": 100003})
learner = h.import_learner("ring")  # None in the verifier
if h.computes:
    h.init_process_group()

# The exercise is split (verifier: true, docs/protocol.md §4): this rank calls the ring and hands
# over the tensor and the bytes its sends carried; its verifier, which never loads the learner's
# module and alone knows the other ranks' inputs, makes the sums and records the cases.

# "sub-" cases: ranks 1..world-1 form one group, so that group rank r is job rank r+1; rank 0
# forms a group of its own (with 2 ranks, two groups of one), where the sum over the group is
# the rank's own input.
send_routes = ["ProcessGroup.send", "Backend.send"]


def peer_of(call):
    """The destination of a counted send (the group's numbering), or -1 where it was given some
    other way than the methods' own (tensors, dstRank, tag): a peer of its own, never the
    neighbour."""
    dst = call.arg(2, "dstRank")
    return dst if isinstance(dst, int) else -1

sub_ranks = list(range(1, h.world)) if h.world > 1 else [0]
groups = [(None, sub_ranks)]
if h.computes:
    groups = [(dist.new_group(sub_ranks), sub_ranks)]
    if h.world > 1:
        groups.append((dist.new_group([0]), [0]))
elif h.world > 1:
    groups.append((None, [0]))

for name, n in h.cases.items():
    if name.startswith("sub-"):
        group, ranks = next((g, r) for g, r in groups if h.rank in r)
        grouped = True
    else:
        group, ranks, grouped = None, list(range(h.world)), False
    result = None
    for it in range(2):
        t = sent = peers = dtypes = None
        if h.computes:
            t = h.exact(n, iter=it, fine=True)
            with h.count_calls(send_routes) as sends, h.forbid():
                learner.ring_all_reduce(t, group)
            sent = sum(x.numel() * x.element_size() for c in sends for x in c.arg(1, "tensors"))
            # Where the sends went (the group's numbering) and what they carried: a ring sends
            # to its right neighbour only, the tensor's own numbers (a red-team pass sent whole
            # tensors to every rank packed as int16, within a ring's bytes).
            peers = sorted({peer_of(c) for c in sends})
            dtypes = sorted({str(x.dtype) for c in sends for x in c.arg(1, "tensors")})
        t = h.hand_over(f"{name}/{it}/t", t)
        sent = h.hand_over(f"{name}/{it}/sent", sent)
        peers = h.hand_over(f"{name}/{it}/peers", peers)
        dtypes = h.hand_over(f"{name}/{it}/dtypes", dtypes)
        if not h.verifies:
            continue
        want = h.exact_sum(n, iter=it, ranks=ranks, device=t.device, fine=True)
        r = h.compare(t, want)
        p = len(ranks)
        where = f"{p} ranks, {n} elements, iteration {it}"
        if grouped and p > 1:
            where += (f" (the group of job ranks {ranks[0]}..{ranks[-1]}: inside it they are "
                      f"numbered 0..{p - 1}, so use dist.get_rank(group) and group_peer=/"
                      "group_dst=/group_src=, or dist.get_global_rank(group, r) where an API "
                      "wants a job rank)")
        if not r.ok():
            r.msg_parts.append(where)
        ring = 2 * (p - 1) * -(-n // p) * t.element_size()
        if len(peers) > 1 or any(d != str(t.dtype) for d in dtypes):
            r.forced = True
            r.msg_parts.append(
                f"this rank sent to {len(peers)} ranks (group ranks {peers}) in "
                f"{', '.join(dtypes)}: a ring sends to one neighbour only, the right one, "
                f"chunks of the tensor as they are ({t.dtype}) ({where})")
        elif sent > ring:
            r.forced = True  # the values may be right: the case fails on what was sent
            r.msg_parts.append(
                f"this rank sent {sent} bytes for a tensor of {n * t.element_size()} bytes on "
                f"{p} ranks; a ring sends 2(p-1) chunks of at most ceil(n/p) elements, "
                f"{ring} bytes here: send each neighbour one chunk per step, not whole tensors "
                f"({where})")
        elif p > 1 and sent < n * t.element_size():
            # Every rank must ship each of its n values at least once for the others to sum.
            r.forced = True
            r.msg_parts.append(
                f"this rank sent only {sent} bytes of its {n * t.element_size()}-byte tensor "
                f"through point-to-point messages, but every rank must send each of its values "
                f"at least once: was the sum made by a collective through another route? Only "
                f"isend/irecv (or P2POp with batch_isend_irecv) may move the data ({where})")
        # Keep the first failure; never leave the loop early: every rank must make the same
        # collective calls whatever its own results.
        if result is None or result.ok():
            result = r
    if h.verifies:
        h.record(name, result)

AFTER_TIMING = ("after the timed calls, a call with new data in the same buffers gave a wrong "
                "result: every call must do the whole work, repeated calls with the same "
                "buffers included")

if h.timing:
    for pi, (name, n) in enumerate(h.perf_cases.items()):
        buf_y = None
        if h.computes:
            buf_y = h.exact(n, iter=100, fine=True)
            buf_b = buf_y.clone()
            all_reduce = h.real("torch.distributed.all_reduce")
            h.time_pair(name, bytes=n * 4, factor=2 * (h.world - 1) / h.world, metric="busbw",
                        yours=lambda i: learner.ring_all_reduce(buf_y, None),
                        baseline=lambda i: all_reduce(buf_b))
            # The timed calls summed buf_y over and over (its values are past checking): new
            # data in the same tensor, one more call as the timed ones made, checked element
            # by element.
            buf_y.copy_(h.exact(n, iter=200 + pi, fine=True))
            with h.forbid():
                learner.ring_all_reduce(buf_y, None)
        buf_y = h.hand_over(f"after-timing/{name}", buf_y)
        if h.verifies:
            h.check_equal("after-timing", buf_y,
                          h.exact_sum(n, iter=200 + pi, device=buf_y.device, fine=True),
                          msg=f"performance case {name}, {n} elements: {AFTER_TIMING}")
elif h.computes:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
