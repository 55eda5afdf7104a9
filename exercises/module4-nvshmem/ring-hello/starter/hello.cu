/*
 * hello.cu — module4/ring-hello: the "hello world" of NVSHMEM.
 *
 * Every PE sends an array of floats into the inbox of the next PE around a ring, from a kernel.
 * The task (TASK.md) walks through it; the lessons module4/01 and module4/02 explain the calls.
 *
 *   1. hello_alloc: the inbox must be symmetric — allocated so that every PE has it at the
 *      same place in NVSHMEM's heap. Which call does that? Is it collective?
 *   2. The kernel: in NVSHMEM you name a remote object with your own pointer to it plus the
 *      number of the PE that owns the copy. Which PE is next, for any number of PEs?
 *   3. ring_hello: launch the kernel on `stream`. Then make sure that, when `stream` gets past
 *      your work, the data sent TO this PE has arrived — the driver reads the inbox right away.
 *
 * As shipped, nothing is allocated and nothing is sent: every case fails at correctness.
 */
#include "ring-hello.h"

void *hello_alloc(size_t bytes) {
  /* TODO: symmetric memory of `bytes` bytes. */
  (void)bytes;
  return NULL;
}

void hello_free(void *p) {
  /* TODO: give back what hello_alloc took. */
  (void)p;
}

void ring_hello(float *inbox, const float *mine, size_t n, cudaStream_t stream) {
  /* TODO: a kernel that puts mine[0..n) into the next PE's inbox, launched on `stream`,
   * then whatever makes this PE's own inbox complete before `stream` moves on. */
  (void)inbox;
  (void)mine;
  (void)n;
  (void)stream;
}
