#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sum.h"

/* Computes the right answer, but first puts its inputs in POSIX shared memory, where another
 * rank on the host could read them: a route between ranks behind the exercise's library. The
 * policy stage refuses shm_open and mmap in learner objects. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  long i;
  size_t bytes = (size_t)n * sizeof(float);
  int fd = shm_open("/mgpu-side-shm", O_RDWR | O_CREAT, 0600);
  if (fd >= 0) {
    if (ftruncate(fd, (off_t)bytes) == 0) {
      float *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        memcpy(p, a, bytes);
        munmap(p, bytes);
      }
    }
    close(fd);
    shm_unlink("/mgpu-side-shm");
  }
  for (i = 0; i < n; i++) out[i] = a[i] + b[i];
}
