/*
 * fused_norm.h: the function module6/fused-norm asks you to write. Course-owned: the driver
 * includes it too, so do not change it. The view and its memory are described in symm_ar.h.
 */
#ifndef MODULE6_FUSED_NORM_H
#define MODULE6_FUSED_NORM_H

#include "symm_ar.h"

/* The all-reduce + residual add + RMSNorm of a tensor-parallel layer, in one kernel launch.
 *
 * Every member p of the team holds a partial activation: v->in[p], `rows` rows of `hidden`
 * floats, row-major (element (r, i) at r * hidden + i). Every member calls this function at
 * about the same time with the same rows, hidden, eps and epoch, and every member computes, for
 * every row r and every i in [0, hidden):
 *
 *     s[r][i]       = v->in[0][r*hidden+i] + ... + v->in[v->world-1][r*hidden+i] + residual[r*hidden+i]
 *     residual_out[r*hidden+i] = s[r][i]
 *     out[r*hidden+i]          = s[r][i] * rsqrt(ms[r] + eps) * gamma[i],
 *                                ms[r] = (s[r][0]^2 + ... + s[r][hidden-1]^2) / hidden
 *
 * - residual (rows * hidden floats) and gamma (hidden floats) are in this GPU's ordinary memory,
 *   read-only. The residual is the same on every member.
 * - residual_out and out (rows * hidden floats each) are in this GPU's ordinary memory; write
 *   every element of both.
 * - epoch: 1 on the first call after the driver zeroed the flags (the start of every case, every
 *   team and every timed size), then 2, 3, ... one more per call. Compare flags with it, never
 *   with a constant.
 * - stream: queue all of the work on it, in one kernel launch, and return without waiting. The
 *   driver queues the fill of your input before the call and reads the outputs right after it,
 *   both on this stream; as soon as your work on the stream is done it overwrites your input.
 * - Before your kernel reads a member's input, that member must have signalled that its input
 *   for this epoch is in place; before your call can finish, every member must have signalled
 *   that it is done reading your input. Signals are stores or atomics in flag words with release
 *   semantics at system scope; waits are loads with acquire semantics at system scope.
 */
void fused_allreduce_rmsnorm(const ar_view *v, const float *residual, const float *gamma, float eps,
                             float *residual_out, float *out, int rows, int hidden, unsigned int epoch,
                             cudaStream_t stream);

#endif /* MODULE6_FUSED_NORM_H */
