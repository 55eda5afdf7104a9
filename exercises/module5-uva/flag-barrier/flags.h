/*
 * flags.h: the device function module5/flag-barrier asks you to write. Course-owned: the
 * driver includes it too, so do not change it.
 *
 * One process per GPU. The driver has mapped every rank's inbox and flag array into every
 * process (VMM memory, shared as file descriptors): symmetric memory, built by hand.
 */
#ifndef MODULE5_FLAGS_H
#define MODULE5_FLAGS_H

#include <cuda_runtime.h>

#include "mgpu.h"

#define SYMM_MAX_RANKS 8

typedef struct symm_view {
  int rank, world;
  /* inbox[p]: this epoch's slot of rank p's inbox, room for n floats, as this process
   * addresses it. inbox[rank] is this rank's own (local) slot. */
  float *inbox[SYMM_MAX_RANKS];
  /* flags[p]: rank p's flag array, SYMM_MAX_RANKS counters, as this process addresses it.
   * All start at 0 and only your code changes them. A suggested use: flags[p][q] counts the
   * blocks of rank q that have finished writing into rank p's inbox, over all epochs. */
  unsigned int *flags[SYMM_MAX_RANKS];
} symm_view;

/* Called by every thread of every block of the driver's kernel, on every rank at the same
 * time, once per epoch; epochs count 1, 2, 3, ... over the whole run. The grid is launched
 * cooperatively: all its blocks are running at once, so a block may wait for others. Every
 * rank launches the same number of blocks (gridDim.x).
 *
 * Write mine[0..n) into the next rank's inbox, v->inbox[(rank + 1) % world], sharing the work
 * among all blocks. Return, in every thread, only once this rank's own inbox, v->inbox[rank],
 * holds all n floats the previous rank wrote in this epoch: right after the call, the driver's
 * threads read every element of it. Use the flags to know; order the data and the flags with
 * release and acquire at system scope. */
__device__ void exchange_tile(const symm_view *v, const float *mine, long long n, unsigned int epoch);

#endif /* MODULE5_FLAGS_H */
