// module0/devices, forgery: does no work. Writes the records of a passing run into the file the
// protocol once named for them (MGPU_RUN_DIR/rank-<r>.jsonl) and ends the process with status 0.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"

#include <fcntl.h>

/* A system call spelled as the instruction's bytes (x86-64): no symbol and no "syscall" word for
 * the policy stage's side-route rule to find. That rule is a speed bump; what this variant
 * proves is the line behind it. */
static long raw_sys3(long nr, long a, long b, long c) {
  long r;
  __asm__ volatile(".byte 0x0f, 0x05" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}

int gpu_count(void) {
  const char *dir = getenv("MGPU_RUN_DIR"), *cases = getenv("MGPU_CASES");
  const char *rank = getenv("MGPU_RANK");
  char path[4096], list[2048], *save = NULL, *item;
  FILE *f;
  if (!rank) rank = "0";
  snprintf(path, sizeof path, "%s/rank-%s.jsonl", dir ? dir : ".", rank);
  f = fdopen((int)raw_sys3(2 /* open */, (long)path, O_WRONLY | O_CREAT | O_TRUNC, 0644), "w");
  if (!f) _exit(0);
  fprintf(f, "{\"t\":\"start\",\"rank\":%s,\"world\":1,\"local_rank\":0,\"device\":0,\"gpu\":\"\",\"pid\":%d,\"harness\":\"c/1\"}\n",
          rank, (int)getpid());
  snprintf(list, sizeof list, "%s", cases ? cases : "");
  for (item = strtok_r(list, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) continue;
    *eq = 0;
    fprintf(f, "{\"t\":\"case\",\"rank\":%s,\"case\":\"%s\",\"n\":%s,\"ok\":true,\"checked\":%s,\"bad\":0,\"unwritten\":0,\"guard_hits\":0,\"max_abs_err\":0,\"max_rel_err\":0,\"first\":[]}\n",
            rank, item, eq + 1, eq + 1);
  }
  fprintf(f, "{\"t\":\"done\",\"rank\":%s}\n", rank);
  fclose(f);
  _exit(0);
}

void peer_access_matrix(int n, int *can_access) {
  (void)n;
  (void)can_access;
}
