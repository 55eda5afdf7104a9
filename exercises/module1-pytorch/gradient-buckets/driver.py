"""Driver of module1/gradient-buckets (course-owned; the learner edits buckets.py).

average_gradients(grads, bucket_bytes) must leave every gradient holding its mean over all
ranks, using one all_reduce per bucket of at most bucket_bytes (a gradient larger than that is
a bucket by itself). The gradients have the shapes of a BERT-like transformer: a case's n is
the model width d; there are LAYERS (24) layers and a vocabulary of 40*d, so about 300 tensors,
most of them tiny (biases, layer norms), sit beside a few large ones.

Checks, per case and iteration: every element of every gradient (exact: inputs are the world
size times numbers in steps of 1/1024, so means are exact in float32 but not in float16); the
all-reduce calls: at most as many as filling buckets in order would need, none larger than the
bucket limit unless it is exactly one oversized gradient; and no collective but all-reduce at
all (barriers aside). The bucket limit is 3/4 of the first gradient (the embedding), capped at
25 MiB, so the oversized path is taken on every case.

Every collective the learner's call launches is counted, whatever route starts it
(h.count_collectives: the dispatcher's c10d ops, which every ProcessGroup method, dist.*
function, object collective, functional collective and DTensor redistribution ends in, and the
backend object's methods, which bypass the dispatcher), each with its bytes read when it was
launched. Counting only the all-reduce routes let a red-team variant pass with one
all_gather_into_tensor per gradient and a local sum: 0 all-reduces is never more than the
buckets allow. Now any other collective fails the case, so the gradients can only travel in
the all-reduces whose number and sizes are checked (variant per-tensor-gather).

Performance (GPU): time of average_gradients against one all_reduce (+ divide) per tensor.
Then "after-timing": new gradients in the timed tensors, one more call, checked, so a function
that stops working after its first calls (when timed) fails.

The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier"): the rank hands over every gradient
(flattened into one tensor) and the sizes of the all-reduce calls it counted; the verifier
makes the means from every rank's inputs, which the rank itself cannot make.
"""
import collections
import math
import sys

import torch

import mgpu_harness

LAYERS = 24
PERF_BUCKET = 25 * 2**20


def transformer_shapes(d):
    shapes = [(40 * d, d), (512, d)]  # token and position embeddings
    for _ in range(LAYERS):
        shapes += [(d,), (d,),                   # layer norm 1
                   (3 * d, d), (3 * d,),         # attention qkv
                   (d, d), (d,),                 # attention output
                   (d,), (d,),                   # layer norm 2
                   (4 * d, d), (4 * d,),         # mlp in
                   (d, 4 * d), (d,)]             # mlp out
    shapes += [(d,), (d,)]                       # final layer norm
    return shapes


def next_fit_buckets(nbytes, limit):
    """Buckets needed when filling them in order: the most a bucketing scheme should use."""
    count, fill = 0, limit + 1
    for b in nbytes:
        if fill + b > limit:
            count, fill = count + 1, 0
        fill += b
    return count


# Collectives that carry no gradients: a barrier, a functional collective's wait.
HARMLESS = ("barrier", "wait")


def others_of(census):
    """{kind: [calls, bytes]} of the collectives other than all-reduce in a census."""
    out = {}
    for c in census:
        if c.kind != "all_reduce" and c.kind not in HARMLESS:
            e = out.setdefault(c.kind, [0, 0])
            e[0] += 1
            e[1] += c.bytes
    return out


def own_grads(shapes, it):
    """This rank's gradients of iteration it: the world size times whole numbers plus multiples
    of 1/1024 (means exact in float32, not in float16/bfloat16)."""
    return [(h.exact(s, iter=it, salt=k) + h.exact(s, iter=it, salt=k + 1000) / 1024) * h.world
            for k, s in enumerate(shapes)]


def mean_grads(shapes, it):
    """The means over ranks of iteration it's gradients (the verifier's: every rank's inputs)."""
    return [h.exact_sum(s, iter=it, salt=k) + h.exact_sum(s, iter=it, salt=k + 1000) / 1024
            for k, s in enumerate(shapes)]


def flat(ts):
    return torch.cat([t.reshape(-1) for t in ts])


AFTER_TIMING = ("after the timed calls, a call with new data in the same buffers gave a wrong "
                "result: every call must do the whole work, repeated calls with the same "
                "buffers included")

h = mgpu_harness.init(default_cases={"small": 24, "odd": 27})
learner = h.import_learner("buckets")  # None in the verifier
if h.computes:
    h.init_process_group()

# The exercise is split (verifier: true, docs/protocol.md §4): this rank calls
# average_gradients on its own gradients and hands over what they hold afterwards, the bytes
# of every all-reduce it counted and the other collectives; its verifier, which never loads the learner's module and alone
# knows the other ranks' inputs, makes the means and records the cases.

for name, d in h.cases.items():
    shapes = transformer_shapes(d)
    nbytes = [math.prod(s) * 4 for s in shapes]
    # Several buckets per case, and the embedding (the first gradient) bigger than one bucket.
    bucket = min(PERF_BUCKET, max(4096, nbytes[0] * 3 // 4))
    # How many gradients of each size above the bucket limit there are: each may travel alone
    # in an all-reduce of its own size, and no more all-reduces of that size may be made (a
    # red-team pass padded every bucket to the embedding's size).
    oversized = collections.Counter(b for b in nbytes if b > bucket)
    most = next_fit_buckets(nbytes, bucket)
    result = None
    for it in range(2):
        got = sizes = others = None
        if h.computes:
            grads = own_grads(shapes, it)
            with h.count_collectives() as census, h.forbid():
                learner.average_gradients(grads, bucket)
            got = mgpu_harness.Unreadable.reading(lambda: flat(grads), "gradients")
            del grads
            # One entry per all-reduce call, its bytes as launched; every other collective.
            sizes = [c.bytes for c in census if c.kind == "all_reduce"]
            others = others_of(census)
        got = h.hand_over(f"{name}/{it}/grads", got)
        sizes = h.hand_over(f"{name}/{it}/allreduce-bytes", sizes)
        others = h.hand_over(f"{name}/{it}/other-collectives", others)
        if not h.verifies:
            continue
        wants = mean_grads(shapes, it)
        r = h.compare(got, flat(wants))
        problems = []
        if not r.ok() and isinstance(got, torch.Tensor):
            numels = [w.numel() for w in wants]
            wrong = doubled = []
            if got.numel() == sum(numels):
                parts = torch.split(got.reshape(-1), numels)
                wrong = [k for k, (g, w) in enumerate(zip(parts, wants))
                         if not torch.equal(g, w.reshape(-1))]
                doubled = [k for k in wrong
                           if torch.equal(parts[k], wants[k].reshape(-1) * h.world)]
            if wrong:
                problems.append(f"iteration {it}: {len(wrong)} of {len(shapes)} gradients are "
                                f"wrong, the first of them #{wrong[0]} of shape "
                                f"{tuple(shapes[wrong[0]])}")
            else:
                problems.append(f"iteration {it}: the gradients are wrong")
            if doubled and len(doubled) == len(wrong) and h.world > 1:
                problems.append(f"they hold {h.world}x the mean: the sum over ranks; divide by "
                                "the world size")
            elif r.unwritten == 0 and 0 < r.max_abs <= 4:
                problems.append(f"the values are close but rounded (largest error "
                                f"{r.max_abs:.3g}, where float32 is exact): was a bucket reduced "
                                "in a lower precision (float16, bfloat16)? Keep the gradients' "
                                "dtype")
        del wants
        if others:
            what = ", ".join(f"{k} x{v[0]} ({v[1]} bytes)" for k, v in sorted(others.items()))
            problems.append(f"iteration {it}: besides all_reduce your code launched other "
                            f"collectives: {what}. The gradients must travel in the buckets' "
                            "all_reduce calls and nothing else (one dist.all_reduce per "
                            "bucket, then divide)")
        if len(sizes) > most:
            problems.append(f"{len(sizes)} all_reduce calls for {len(shapes)} gradients; filling "
                            f"buckets of {bucket} bytes in order needs only {most}")
        made = collections.Counter(s for s in sizes if s > bucket)
        big = [s for s, k in sorted(made.items()) if k > oversized.get(s, 0)]
        if big:
            problems.append(f"{made[big[0]]} all_reduce call(s) of {big[0]} bytes: buckets hold "
                            f"at most {bucket} bytes, and only a gradient larger than that is a "
                            f"bucket by itself ({oversized.get(big[0], 0)} gradient(s) of "
                            f"{big[0]} bytes here)")
        if problems and r.ok():
            r.forced = True  # the values are right: the case fails on the calls
        r.msg_parts += problems
        # Keep the first failure; never leave the loop early: every rank must make the same
        # collective calls whatever its own results.
        if result is None or result.ok():
            result = r
    if h.verifies:
        h.record(name, result)

if h.timing:
    for pi, (name, d) in enumerate(h.perf_cases.items()):
        shapes = transformer_shapes(d)
        got = None
        if h.computes:
            grads_y = [h.exact(s, iter=100, salt=k) for k, s in enumerate(shapes)]
            grads_b = [g.clone() for g in grads_y]
            all_reduce = h.real("torch.distributed.all_reduce")

            def per_tensor(i):
                for g in grads_b:
                    all_reduce(g)
                    g.div_(h.world)

            h.time_pair(name, bytes=sum(g.numel() * 4 for g in grads_y), factor=1,
                        metric="time",
                        yours=lambda i: learner.average_gradients(grads_y, PERF_BUCKET),
                        baseline=per_tensor)
            del grads_b
            # New gradients in the timed tensors, one more call as the timed ones made,
            # checked by the verifier.
            for g, f in zip(grads_y, own_grads(shapes, 200 + pi)):
                g.copy_(f)
            with h.forbid():
                learner.average_gradients(grads_y, PERF_BUCKET)
            got = mgpu_harness.Unreadable.reading(lambda: flat(grads_y), "gradients")
            del grads_y
        got = h.hand_over(f"after-timing/{name}", got)
        if h.verifies:
            h.check_equal("after-timing", got, flat(mean_grads(shapes, 200 + pi)),
                          msg=f"performance case {name}: {AFTER_TIMING}")
        del got
elif h.computes:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
