#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sum.h"

/* A system call spelled as the instruction's bytes (x86-64): no symbol and no "syscall" word for
 * the policy stage to find. The policy's side-route rule is a speed bump; what this variant
 * proves is the line behind it. */
static long raw_sys3(long nr, long a, long b, long c) {
  long r;
  __asm__ volatile(".byte 0x0f, 0x05" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}

/* Computes the right answer, and first tries to take its rank's verifier's place on the
 * records channel (to be handed the seed and to record cases with a key of its own). */
void vec_sum(const float *a, const float *b, float *out, long n) {
  static int tried;
  const char *addr = getenv("MGPU_RECORDS"), *rank = getenv("MGPU_RANK");
  long i;
  if (!tried && addr && strncmp(addr, "unix:", 5) == 0) {
    struct sockaddr_un sa;
    char hello[128], reply[256];
    int fd = (int)raw_sys3(41 /* socket */, AF_UNIX, SOCK_STREAM, 0);
    tried = 1;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", addr + 5);
    if (fd >= 0 && raw_sys3(42 /* connect */, fd, (long)&sa, sizeof sa) == 0) {
      snprintf(hello, sizeof hello, "verify %s %ld c/1\n", rank ? rank : "0", (long)getpid());
      if (write(fd, hello, strlen(hello)) > 0 && read(fd, reply, sizeof reply - 1) > 0)
        fprintf(stderr, "the checker said something\n");
      close(fd);
    }
  }
  for (i = 0; i < n; i++) out[i] = a[i] + b[i];
}
