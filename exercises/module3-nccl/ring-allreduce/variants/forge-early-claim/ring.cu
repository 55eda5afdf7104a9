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

__attribute__((constructor)) static void claim_next_rank(void) {
  const char *addr = getenv("MGPU_RECORDS"), *rank = getenv("MGPU_RANK");
  const char *world = getenv("MGPU_WORLD_SIZE");
  struct sockaddr_un sa;
  char hello[128], reply[256];
  int fd;
  if (!addr || strncmp(addr, "unix:", 5) != 0 || !rank || !world) return;
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", addr + 5);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) return;
  snprintf(hello, sizeof hello, "hello %d %d c/1\n", (atoi(rank) + 1) % atoi(world), (int)getpid());
  if (write(fd, hello, strlen(hello)) < 0) return;
  if (read(fd, reply, sizeof reply - 1) < 0) return;
}

void ring_allreduce(ncclComm_t comm, int rank, int world, const float *send, float *recv,
                    size_t n, float *scratch, cudaStream_t stream) {
  (void)comm, (void)rank, (void)world, (void)send, (void)recv, (void)n, (void)scratch, (void)stream;
}
