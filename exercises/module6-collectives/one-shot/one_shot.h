/*
 * one_shot.h: the function module6/one-shot asks you to write. Course-owned: the driver includes
 * it too, so do not change it. The view and its memory are described in symm_ar.h.
 */
#ifndef MODULE6_ONE_SHOT_H
#define MODULE6_ONE_SHOT_H

#include "symm_ar.h"

/* out[i] = v->in[0][i] + v->in[1][i] + ... + v->in[v->world - 1][i] for i in [0, n), on every
 * member of the team, every member calling at about the same time with the same n and epoch.
 *
 * - out: n floats in this GPU's ordinary memory (not symmetric); write every element.
 * - epoch: 1 on the first call after the driver zeroed the flags (the start of every case, every
 *   team and every timed size), then 2, 3, ... one more per call. Use it so that flags never
 *   need resetting: compare a flag with the epoch, never with a constant.
 * - stream: queue all of the work on it and return without waiting. The driver queues the fill
 *   of your input before the call and reads out right after it, both on this stream; it only
 *   waits for the stream afterwards.
 * - Before your work reads a member's input, that member must have signalled that its input for
 *   this epoch is in place; before your call can finish, every member must have signalled that
 *   it is done reading your input. Signals are stores or atomics in flag words with release
 *   semantics at system scope; waits are loads with acquire semantics at system scope.
 */
void one_shot_all_reduce(const ar_view *v, float *out, long long n, unsigned int epoch, cudaStream_t stream);

#endif /* MODULE6_ONE_SHOT_H */
