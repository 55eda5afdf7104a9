/*
 * module3/ring-allreduce — variant side-open-alias: the sum travels through files, not NCCL, opened with glibc's exported alias __open
 * (GLIBC_2.2.5, the same function as open) instead of open/openat/fopen. Each rank writes its
 * input to MGPU_RDZV_DIR (or /dev/shm), waits for every other rank's file and sums on the host.
 */
#include "ring-allreduce.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <vector>

extern "C" int __open(const char *, int, ...);

static void name(char *buf, size_t len, int r, unsigned long call) {
  const char *dir = getenv("MGPU_RDZV_DIR");
  snprintf(buf, len, "%s/rt-side-%d-%lu", dir ? dir : "/dev/shm", r, call);
}

void ring_allreduce(ncclComm_t comm, int rank, int world, const float *send, float *recv,
                    size_t n, float *scratch, cudaStream_t stream) {
  (void)comm;
  (void)scratch;
  static unsigned long call = 0;
  call++;
  size_t bytes = n * sizeof(float);
  std::vector<float> mine(n), sum(n), other(n);
  MGPU_CUDA(cudaMemcpyAsync(mine.data(), send, bytes, cudaMemcpyDeviceToHost, stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));
  char path[4096], tmp[4200];
  name(path, sizeof path, rank, call);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = __open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  for (size_t off = 0; off < bytes;) off += (size_t)write(fd, (const char *)mine.data() + off, bytes - off);
  close(fd);
  rename(tmp, path);
  for (int p = 0; p < world; p++) { /* in rank order on every rank: the same float sums */
    if (p == rank) {
      for (size_t i = 0; i < n; i++) sum[i] += mine[i];
      continue;
    }
    name(path, sizeof path, p, call);
    while ((fd = __open(path, O_RDONLY)) < 0) usleep(100);
    for (size_t off = 0; off < bytes;) off += (size_t)read(fd, (char *)other.data() + off, bytes - off);
    close(fd);
    for (size_t i = 0; i < n; i++) sum[i] += other[i];
  }
  MGPU_CUDA(cudaMemcpyAsync(recv, sum.data(), bytes, cudaMemcpyHostToDevice, stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));
}
