"""Driver of module1/ring-allreduce (course-owned; the learner edits ring.py).

ring_all_reduce(t, group) must leave in t, on every rank of the group, the element-wise sum over
the group's ranks, using point-to-point messages only (the collectives that would do the work
are forbidden: MGPU_FORBID). Cases are element counts of float32 tensors; a case whose name
starts with "sub-" runs on a group of world-1 ranks (3 ranks when the job has 4), so the ring
is also checked at an odd number of ranks, while the last rank runs it on a group of one. Inputs are integer-valued: sums are exact in any
order and the comparison uses tolerance 0.

Performance (GPU): busbw of ring_all_reduce against dist.all_reduce on the same size, ABAB.
"""
import sys

import torch.distributed as dist

import mgpu_harness

h = mgpu_harness.init(default_cases={"tiny": 5, "odd": 100003, "sub-odd": 100003})
learner = h.import_learner("ring")
h.init_process_group()

# "sub-" cases: ranks 0..world-2 form one group; the last rank forms a group of its own (with
# 2 ranks, two groups of one), where the sum over the group is the rank's own input.
sub_ranks = list(range(max(1, h.world - 1)))
groups = [(dist.new_group(sub_ranks), sub_ranks)]
if h.world > 1:
    groups.append((dist.new_group([h.world - 1]), [h.world - 1]))

for name, n in h.cases.items():
    if name.startswith("sub-"):
        group, ranks = next((g, r) for g, r in groups if h.rank in r)
    else:
        group, ranks = None, list(range(h.world))
    result = None
    for it in range(2):
        t = h.exact(n, iter=it)
        want = h.exact_sum(n, iter=it, ranks=ranks)
        with h.forbid():
            learner.ring_all_reduce(t, group)
        r = h.compare(t, want)
        if not r.ok():
            r.msg_parts.append(f"{len(ranks)} ranks, {n} elements, iteration {it}")
        # Keep the first failure; never leave the loop early: every rank must make the same
        # collective calls whatever its own results.
        if result is None or result.ok():
            result = r
    h.record(name, result)

if h.timing:
    for name, n in h.perf_cases.items():
        buf_y = h.exact(n, iter=100)
        buf_b = buf_y.clone()
        all_reduce = h.real("torch.distributed.all_reduce")
        h.time_pair(name, bytes=n * 4, factor=2 * (h.world - 1) / h.world, metric="busbw",
                    yours=lambda i: learner.ring_all_reduce(buf_y, None),
                    baseline=lambda i: all_reduce(buf_b))
else:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
