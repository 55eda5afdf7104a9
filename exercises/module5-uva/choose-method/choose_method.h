/*
 * choose_method.h: the function module5/choose-method asks you to write. Course-owned: the
 * driver includes it too, so do not change it.
 */
#ifndef MODULE5_CHOOSE_METHOD_H
#define MODULE5_CHOOSE_METHOD_H

#include <stddef.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The three ways the driver can move `bytes` bytes from one GPU's memory to the next GPU's.
 * All three are the course's, in driver.cu; your function only picks one. */
typedef enum method {
  METHOD_NONE = 0, /* not a method: what the starter returns */
  COPY_ENGINE = 1, /* cudaMemcpyPeerAsync: a copy engine, no SM */
  SM_STORES = 2,   /* a kernel of 16-byte loads and stores, 2 blocks of 1024 threads per SM */
  TMA = 3          /* bulk copies (cp.async.bulk) through shared memory, one block on each of
                      tma_sms SMs */
} method;
#define NUM_METHODS 4 /* array size for tables indexed by method; index 0 unused */

/* One probe: what the driver measured at the start of this run, GPU 0 -> GPU 1, for one
 * transfer size: the median time per transfer of each method, in µs. */
typedef struct probe {
  size_t bytes;
  double us[NUM_METHODS]; /* us[COPY_ENGINE], us[SM_STORES], us[TMA]; us[0] is 0 */
} probe;

/* What your function knows about the machine. */
typedef struct machine_info {
  int gpus;               /* GPUs in the run; each copies to the next */
  int same_gpu;           /* 1 on a machine with one GPU: it copies into its own memory */
  int sms;                /* SMs of GPU 0 */
  int tma_sms;            /* SMs the TMA method runs on (one block of one issuing thread each) */
  int cc_major, cc_minor; /* compute capability of GPU 0 */
  probe small;            /* a transfer of small.bytes (2 KiB): nearly all fixed cost */
  probe large;            /* a transfer of large.bytes (512 MiB): nearly all bandwidth */
} machine_info;

/* Returns the method the driver should use to copy `bytes` bytes (1 to 1 GiB) from one GPU to
 * the next: the fastest one for that size, or one within 5 % of the fastest.
 *
 * The driver asks once for every size it will copy or time, twice each, before it copies or
 * times anything; the same size and machine must get the same answer. Decide on the host:
 * the driver moves the bytes (the policy stage refuses copies and threads of your own here). */
method choose_method(size_t bytes, const machine_info *m);

#ifdef __cplusplus
}
#endif

#endif /* MODULE5_CHOOSE_METHOD_H */
