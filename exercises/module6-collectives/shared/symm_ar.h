/*
 * symm_ar.h: what module 6's all-reduce exercises hand you. Course-owned: the driver includes it
 * too, so do not change it.
 *
 * One process per GPU. Before the first call the driver has given every rank one block of
 * symmetric memory (the same size on every GPU, mapped read/write into every process) and cut it
 * into three parts per rank: an input, a scratch area and a flag area. A call works for a *team*:
 * the ranks listed in the view, numbered 0 .. world-1 in the order the view lists them. The team
 * is usually every rank, but the driver also runs each case with smaller teams (each rank alone,
 * or the ranks split in two), so nothing may assume that the team is "all GPUs" or has two
 * members.
 */
#ifndef MODULE6_SYMM_AR_H
#define MODULE6_SYMM_AR_H

#include <cuda_runtime.h>

#include "mgpu.h"

#define AR_MAX_RANKS 8      /* the most members a team can have (MGPU_SYMM_MAX_RANKS) */
#define AR_FLAG_WORDS 16384 /* unsigned ints in each member's flag area */

typedef struct ar_view {
  int rank;  /* your index in the team: 0 .. world-1 */
  int world; /* members in the team: 1 .. AR_MAX_RANKS */
  /* in[p]: member p's input for this call, n floats, as this process addresses it (in[rank] is
   * your own, in local memory). The owner's driver filled it before the call. Read-only: read any
   * member's, write none. As soon as a member's call has returned, its driver overwrites its
   * input with the next epoch's data; so a member must not return while anyone may still read
   * its input. */
  const float *in[AR_MAX_RANKS];
  /* scratch[p]: member p's scratch area, scratch_floats floats, yours to use as you like. At the
   * start of every case the driver fills it with a NaN, never again. */
  float *scratch[AR_MAX_RANKS];
  long long scratch_floats; /* at least 2 * world * n for every call */
  /* flags[p]: member p's AR_FLAG_WORDS flag words. All are 0 before the call with epoch 1; only
   * your code changes them after that. */
  unsigned int *flags[AR_MAX_RANKS];
} ar_view;
/* Entries p >= world of in, scratch and flags belong to no member: they point at memory of this
 * GPU whose floats are a NaN and whose flags nobody ever sets, so reading a non-member shows as a
 * NaN in out and waiting for one never ends (reported as a hang). Keep the view's pointers for
 * one call only: the team and the areas change between cases. */

#endif /* MODULE6_SYMM_AR_H */
