/*
 * hostid_shim.c — a test rig, not part of the course: loaded with LD_PRELOAD into every rank of
 * a check on a one-GPU machine, it gives each rank its own NCCL_HOSTID when NCCL reads it.
 *
 * NCCL (2.28) refuses two ranks on one GPU of one host ("Duplicate GPU detected"); the test is
 * made only between ranks whose host hashes are equal, and NCCL_HOSTID replaces the string the
 * hash is made of (src/misc/utils.cc, getHostHashOnce). With a host id per rank, NCCL takes the
 * ranks for two hosts and joins them with its socket transport over the machine's own network
 * interface: slow, but every NCCL call and every byte is real, and so is each call's report to
 * a profiler plugin. Timings under it mean nothing; the runs that use it are --no-perf.
 *
 * The id is made when NCCL asks for it (getenv is interposed), not when the library loads: a
 * warm Python rank is forked from a zygote that loaded this shim before any rank existed, and
 * only gets its rank variables after the fork (mgpu_zygote.py replaces the environment). NCCL
 * reads NCCL_HOSTID through getenv (ncclGetEnv), from its own shared object, so the PLT call
 * reaches this function.
 *
 * Build: cc -shared -fPIC -O2 -o hostid_shim.so hostid_shim.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef char *(*getenv_fn)(const char *);

static char *real_getenv(const char *name) {
  static getenv_fn next;
  if (!next) next = (getenv_fn)dlsym(RTLD_NEXT, "getenv");
  return next ? next(name) : NULL;
}

char *getenv(const char *name) {
  /* The rank variables of the supervisor's plain launch, torchrun and Open MPI, in that order. */
  static const char *const vars[] = {"MGPU_RANK", "RANK", "OMPI_COMM_WORLD_RANK"};
  static __thread char id[96];
  size_t i;
  if (strcmp(name, "NCCL_HOSTID") != 0) return real_getenv(name);
  for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *r = real_getenv(vars[i]);
    if (r && *r) {
      snprintf(id, sizeof id, "mgpu-test-host-%s", r);
      return id;
    }
  }
  return real_getenv(name);
}
