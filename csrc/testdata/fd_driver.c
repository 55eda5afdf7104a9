/*
 * fd_driver.c — a CPU program for csrc/fd_test.go: ranks pass file descriptors to each other
 * with mgpu_share_fds and check that each one reaches the file its owner opened.
 *   (no argument)  two exchanges: two descriptors per rank, then none;
 *   mismatch       rank 1 offers one descriptor, the others two (a harness error);
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mgpu.h"

/* An unlinked temporary file holding `text`. */
static int file_with(const char *text) {
  char path[] = "/tmp/mgpu-fd-test-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) mgpu_fail("driver", "mkstemp", __FILE__, __LINE__, 0, "cannot create a file");
  unlink(path);
  if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
    mgpu_fail("driver", "write", __FILE__, __LINE__, 0, "short write");
  return fd;
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  int mine[2], *all, r, i, n = 2;
  char text[64], got[64];
  const char *mode = argc > 1 ? argv[1] : "normal";
  mgpu_init_nodevice(&ctx, argc, argv);
  if (strcmp(mode, "mismatch") == 0 && ctx.rank == 1) n = 1;
  for (i = 0; i < 2; i++) {
    snprintf(text, sizeof text, "rank %d fd %d", ctx.rank, i);
    mine[i] = file_with(text);
  }
  all = (int *)malloc(sizeof(int) * (size_t)ctx.world * 2);
  mgpu_share_fds(&ctx, "files", mine, n, all);
  for (r = 0; r < ctx.world; r++) {
    for (i = 0; i < n; i++) {
      int fd = all[r * n + i];
      ssize_t k;
      snprintf(text, sizeof text, "rank %d fd %d", r, i);
      memset(got, 0, sizeof got);
      k = pread(fd, got, sizeof got - 1, 0);
      if (k < 0 || strcmp(got, text) != 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "slot %d of rank %d holds \"%s\", want \"%s\"", i, r, got, text);
        mgpu_fail("driver", "check", __FILE__, __LINE__, 0, msg);
      }
      if (fd == mine[i]) mgpu_fail("driver", "check", __FILE__, __LINE__, 0, "own slot is not a copy");
      close(fd);
    }
  }
  mgpu_share_fds(&ctx, "none", NULL, 0, NULL);
  mgpu_note("fds ok: %d ranks", ctx.world);
  close(mine[0]);
  close(mine[1]);
  free(all);
  return mgpu_finish(&ctx);
}
