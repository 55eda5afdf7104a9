/*
 * two_shot.h: the function module6/two-shot asks you to write. Course-owned: the driver includes
 * it too, so do not change it. The view and its memory are described in symm_ar.h.
 */
#ifndef MODULE6_TWO_SHOT_H
#define MODULE6_TWO_SHOT_H

#include "symm_ar.h"

/* The same result as one_shot_all_reduce (out[i] = sum over members p of v->in[p][i], every
 * element, on every member), computed in two steps through peer memory:
 *   1. reduce-scatter: the range [0, n) is cut into world chunks, one per member; each member
 *      adds up its own chunk of everyone's input;
 *   2. all-gather: each member hands its summed chunk to every other member (through their
 *      scratch areas) and collects theirs into out.
 * The arguments and the rules (epoch, stream, signals with release, waits with acquire at system
 * scope, your input read-only and in use by others until they say they are done with it) are
 * those of one_shot.h. Every chunk boundary must be computed the same way on every member, and
 * every element of [0, n) must belong to exactly one chunk, whatever n and world are.
 */
void two_shot_all_reduce(const ar_view *v, float *out, long long n, unsigned int epoch, cudaStream_t stream);

#endif /* MODULE6_TWO_SHOT_H */
