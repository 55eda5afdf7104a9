/*
 * hostid_shim.c — a test rig, not part of the course: loaded with LD_PRELOAD into every rank of
 * a check on a one-GPU machine, it gives each rank its own NCCL_HOSTID before NCCL reads it.
 *
 * NCCL (2.28) refuses two ranks on one GPU of one host ("Duplicate GPU detected"); the test is
 * made only between ranks whose host hashes are equal, and NCCL_HOSTID replaces the string the
 * hash is made of (src/misc/utils.cc, getHostHashOnce). With a host id per rank, NCCL takes the
 * ranks for two hosts and joins them with its socket transport over the machine's own network
 * interface: slow, but every NCCL call and every byte is real, and so is each call's report to
 * a profiler plugin. Timings under it mean nothing; the runs that use it are --no-perf.
 *
 * Build: cc -shared -fPIC -O2 -o hostid_shim.so hostid_shim.c
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void mgpu_test_hostid(void) {
  /* The rank variables of the supervisor's plain launch, torchrun and Open MPI, in that order. */
  static const char *const vars[] = {"MGPU_RANK", "RANK", "OMPI_COMM_WORLD_RANK"};
  char id[96];
  size_t i;
  for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *r = getenv(vars[i]);
    if (r && *r) {
      snprintf(id, sizeof id, "mgpu-test-host-%s", r);
      setenv("NCCL_HOSTID", id, 1);
      return;
    }
  }
}
