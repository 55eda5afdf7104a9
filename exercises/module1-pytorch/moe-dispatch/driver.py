"""Driver of module1/moe-dispatch (course-owned; the learner edits moe.py).

Every rank holds tokens (rows) and, for each, the rank of the expert that must process it.
dispatch(tokens, dest) sends every row to its expert's rank and returns the rows this rank
received, grouped by source rank (rank 0's first), each group in the sender's row order, plus
whatever state combine needs. combine(out, state) sends the processed rows back and returns
them in the original order. Ranks hold different numbers of tokens and routing is skewed, so
the split sizes are uneven and some are zero.

The driver's "expert" on rank e multiplies its rows by a whole number from 2 to 9 drawn from
rank e's own inputs of the iteration (expert_factor), so combine's result can only come from the
rows sent back, not be recomputed from the inputs. The learner gets copies of the tokens and
destinations, so changing them in place cannot change what the driver expects. Rows are
integer-valued float32:
both checks (what was received; what came back) are exact. A case's n is the number of
tokens on rank 0 (rank r has n + 37 r, except in "empty-" cases where rank 0 has none);
rows have D numbers (PERF_D in the timed case).

Right rows are not enough: sending every token to every rank, which keeps its own, gives the
same rows. The rank counts every collective dispatch and combine launch (h.count_collectives, any
kind, any route) and hands over the bytes each wrote into this rank's tensors; the verifier
allows the rows routed to this rank (dispatch) or this rank's own rows (combine) plus
meta_allowance() bytes for the counts.

Performance (GPU, bfloat16): dispatch + combine against an all_gather-based exchange (every
token to every rank, then reduce_scatter back). Then "after-timing": the rows of the last timed
call, then new rows and destinations in the timed tensors and one more call, both checked, so
code that stops working after its first calls (when timed) fails.

The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier"): the rank hands over what dispatch
returned and what combine returned; the verifier makes every rank's tokens, destinations and
expert factors from the seed, hence the rows this rank must receive, which the rank itself
cannot make. The bytes the rank's collectives received are counted in the rank: see
docs/protocol.md §4, "How the result was made".
"""
import sys

import torch

import mgpu_harness

D = 24
PERF_D = 4096


def expert_factor(e, it):
    """What the expert on rank e multiplies its rows by in iteration it: 2 to 9, from rank e's
    own inputs (the rank makes its own; the verifier every rank's)."""
    return 2 + int(h.exact(1, rank=e, iter=it, salt=2).item() + 64) % 8


def tokens_of(r, name, n, it, d):
    # Rank 0 sends nothing in "empty-" cases, but only where another rank still has tokens: on
    # one rank the case would check nothing (a runner error), so it is a plain case there.
    rows = 0 if (name.startswith("empty-") and r == 0 and h.world > 1) else n + 37 * r
    x = h.exact((rows, d), rank=r, iter=it)
    u = h.exact((rows,), rank=r, iter=it, salt=1)  # integers in [-64, 64]
    if name.startswith("one-"):
        dest = torch.full((rows,), h.world - 1, dtype=torch.int64, device=h.device)
    else:
        # Skewed: about a quarter of the rows go to rank 0, the rest spread evenly.
        dest = torch.where(u > 32, torch.zeros_like(u), (u + 64) % h.world).to(torch.int64)
    return x, dest


def perf_tokens(n, it, r=None):
    """Rank r's rows (bfloat16, whole numbers: exact) and destinations, spread evenly, for the
    timed calls (it = 100) and the call after them (it = 200); this rank's by default."""
    r = h.rank if r is None else r
    return h.exact((n, PERF_D), rank=r, iter=it, dtype=torch.bfloat16), perf_dest(n, it, r)


def perf_dest(n, it, r):
    return ((h.exact((n,), rank=r, iter=it, salt=1) + 64) % h.world).to(torch.int64)


# What a rank may receive besides the rows routed to it, in each of dispatch and combine: the
# counts (one integer per pair of ranks, through any collective, even a world x world matrix
# all-reduced) and some room; far less than the extra rows of sending every token everywhere in
# every case but "tiny".
def meta_allowance():
    return 4096 + 64 * h.world * h.world


def received_by_kind(census):
    """{kind: [calls, bytes received]} of every collective in a census (h.count_collectives),
    for the verifier."""
    return mgpu_harness.collectives_besides(census, ())


def over_budget(what, census, rows, row_bytes):
    """The problem, if the collectives of dispatch or combine (census: received_by_kind, as
    the rank handed it over) brought this rank more than its rows and the counts, else None."""
    if not isinstance(census, dict):
        return f"{what}: the rank did not hand over what its collectives received"
    got = sum(int(v[1]) for v in census.values())
    need = rows * row_bytes
    if got <= need + meta_allowance():
        return None
    calls = mgpu_harness.describe_collectives(census)
    return (f"{what}: this rank's collectives received {got} bytes ({calls}), where the "
            f"{rows} rows routed to it are {need} bytes (and {meta_allowance()} more are allowed "
            "for the counts): send each row only to the rank that needs it, not every token "
            "everywhere or padded to a fixed capacity")


AFTER_TIMING = ("after the timed calls, a call with new data in the same buffers gave a wrong "
                "result")


def after_timing(name, n, x=None, dest=None, last=None, exchange=None, factor=None):
    """The rows of the last timed call (x and dest had not changed), then new rows and
    destinations in x and dest and one more call as the timed ones made (in the rank), both
    compared exactly (by the verifier) with what the experts make of each row: row i times
    expert_factor(dest[i], it), the factor of the rank it went to (it = 100 for the timed
    calls, 200 for the one after them); one record. A rank knows only its own factor, so the
    rows can only come back from the experts."""
    back = received = None
    last = h.hand_over(f"after-timing/{name}/last", last)
    if h.computes:
        x2, dest2 = perf_tokens(n, 200)
        x.copy_(x2)
        dest.copy_(dest2)
        factor[0] = expert_factor(h.rank, 200)
        del x2, dest2
        with h.count_collectives() as census, h.forbid():
            back = exchange()
        received = received_by_kind(census)
    back = h.hand_over(f"after-timing/{name}/fresh", back)
    received = h.hand_over(f"after-timing/{name}/received", received)
    if not h.verifies:
        return

    def want(it):
        x, dest = perf_tokens(n, it)
        factors = torch.tensor([expert_factor(e, it) for e in range(h.world)],
                               dtype=x.dtype, device=x.device)
        return x * factors[dest].unsqueeze(1)

    r = h.compare(last, want(100))
    if not r.ok():
        r.msg_parts.append("the rows returned by the last timed call were wrong")
    r2 = h.compare(back, want(200))
    if not r2.ok():
        r2.msg_parts.append(AFTER_TIMING)
    r.add(r2)
    # Dispatch and combine together: the rows routed here, then this rank's own coming back.
    routed = sum(int((perf_dest(n, 200, src) == h.rank).sum()) for src in range(h.world))
    problem = over_budget("after-timing (dispatch and combine)", received, routed + n,
                          PERF_D * 2)
    if problem:
        r.forced = True
        r.msg_parts.append(problem)
    if not r.ok():
        r.msg_parts.append(f"performance case {name}: every call must do the whole work, "
                           "repeated calls with the same buffers included")
    h.record("after-timing", r)


h = mgpu_harness.init(default_cases={"tiny": 3, "uneven": 1000, "empty-rank0": 50,
                                     "one-expert": 64})
learner = h.import_learner("moe")  # None in the verifier
if h.computes:
    h.init_process_group()

# The exercise is split (verifier: true, docs/protocol.md §4): this rank dispatches its own
# tokens, applies its expert, combines, and hands over what dispatch and combine returned; its
# verifier, which never loads the learner's module and alone knows the other ranks' tokens,
# makes the expected rows and records the cases.

for name, n in h.cases.items():
    result = None
    for it in range(2):
        recv = back = into_dispatch = into_combine = None
        if h.computes:
            x, dest = tokens_of(h.rank, name, n, it, D)
            with h.count_collectives() as census, h.forbid():
                recv, state = learner.dispatch(x.clone(), dest.clone())
            into_dispatch = received_by_kind(census)
        # Handed over before combine runs, as the rank saw it then.
        recv = h.hand_over(f"{name}/{it}/recv", recv)
        into_dispatch = h.hand_over(f"{name}/{it}/dispatch-received", into_dispatch)
        if h.computes:
            # combine runs whatever dispatch returned: every rank must make the same collective
            # calls, whatever its own results.
            out = recv * expert_factor(h.rank, it)  # the expert
            with h.count_collectives() as census, h.forbid():
                back = learner.combine(out, state)
            into_combine = received_by_kind(census)
            del x, dest, out, state
        back = h.hand_over(f"{name}/{it}/back", back)
        into_combine = h.hand_over(f"{name}/{it}/combine-received", into_combine)
        if not h.verifies:
            continue
        x, dest = tokens_of(h.rank, name, n, it, D)
        want_recv = []
        for src in range(h.world):
            xs, ds = tokens_of(src, name, n, it, D)
            want_recv.append(xs[ds == h.rank])
        want_recv = torch.cat(want_recv)
        r = h.compare(recv, want_recv)
        if not r.ok():
            r.msg_parts.append(
                f"iteration {it}: dispatch returned the wrong rows: expected {want_recv.shape[0]} "
                "rows, those sent to this rank grouped by source rank (rank 0 first), each group "
                "in the sender's order")
        factors = torch.tensor([expert_factor(e, it) for e in range(h.world)],
                               dtype=x.dtype, device=x.device)
        want = x * factors[dest].unsqueeze(1)
        rc = h.compare(back, want)
        if not rc.ok() and r.ok():
            msg = f"iteration {it}: combine returned the wrong rows"
            if isinstance(back, torch.Tensor) and back.shape == want.shape \
                    and torch.equal(torch.sort(back.sum(1)).values,
                                    torch.sort(want.sum(1)).values):
                msg += (": the right rows in the wrong order; put each back where its token "
                        "was in the input")
            rc.msg_parts.append(msg)
        r.add(rc)  # one case: what was received, then what came back
        # The values can be right with every token sent everywhere: the bytes say otherwise.
        row_bytes = D * x.element_size()
        for problem in (over_budget(f"iteration {it}: dispatch", into_dispatch,
                                    want_recv.shape[0], row_bytes),
                        over_budget(f"iteration {it}: combine", into_combine, x.shape[0],
                                    row_bytes)):
            if problem:
                r.forced = True
                r.msg_parts.append(problem)
        if result is None or result.ok():
            result = r
    if h.verifies:
        h.record(name, result)

if h.timing:
    for name, n in h.perf_cases.items():
        if not h.computes:
            after_timing(name, n)
            continue
        all_gather = h.real("torch.distributed.all_gather_into_tensor")
        reduce_scatter = h.real("torch.distributed.reduce_scatter_tensor")
        x, dest = perf_tokens(n, 100)
        factor = [expert_factor(h.rank, 100)]  # this rank's expert; after_timing changes it

        def yours(i):
            recv, state = learner.dispatch(x, dest)
            last[0] = learner.combine(recv * factor[0], state)
            return last[0]

        last = [None]

        all_x = torch.empty(h.world * n, PERF_D, device=h.device, dtype=x.dtype)
        all_dest = torch.empty(h.world * n, device=h.device, dtype=dest.dtype)
        back_all = torch.zeros_like(all_x)
        back = torch.empty_like(x)

        def gathered(i):
            # Every token to every rank; each keeps its own, then the results go home through
            # a reduce-scatter of a mostly-zero buffer.
            all_gather(all_x, x)
            all_gather(all_dest, dest)
            mine = all_dest == h.rank
            back_all.zero_()
            back_all[mine] = all_x[mine] * factor[0]
            reduce_scatter(back, back_all)

        h.time_pair(name, bytes=n * PERF_D * 2, factor=1, metric="time", yours=yours,
                    baseline=gathered)
        del all_x, all_dest, back_all, back
        after_timing(name, n, x, dest, last[0], lambda: yours(0), factor)
elif h.computes:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
