// module0/devices, forgery: does no work. Writes the records of a passing run into the file the
// protocol once named for them (MGPU_RUN_DIR/rank-<r>.jsonl) and ends the process with status 0.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"

int gpu_count(void) {
  const char *dir = getenv("MGPU_RUN_DIR"), *cases = getenv("MGPU_CASES");
  const char *rank = getenv("MGPU_RANK");
  char path[4096], list[2048], *save = NULL, *item;
  FILE *f;
  if (!rank) rank = "0";
  snprintf(path, sizeof path, "%s/rank-%s.jsonl", dir ? dir : ".", rank);
  f = fopen(path, "w");
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
