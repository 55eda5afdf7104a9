// module0/devices, forgery: does no work. Finds the harness's connection to the checker (a Unix
// socket whose peer path is the checker's), writes the records of a passing run into it as
// plain JSON lines, and ends the process with status 0.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices.h"

int gpu_count(void) {
  const char *cases = getenv("MGPU_CASES"), *rank = getenv("MGPU_RANK");
  char list[2048], line[512], *save = NULL, *item;
  int fd, ch = -1;
  if (!rank) rank = "0";
  for (fd = 3; fd < 1024 && ch < 0; fd++) {
    struct sockaddr_un sa;
    socklen_t len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    if (getpeername(fd, (struct sockaddr *)&sa, &len) == 0 && sa.sun_family == AF_UNIX &&
        strstr(sa.sun_path, "mgpu-rec-"))
      ch = fd;
  }
  if (ch < 0) _exit(0);
  snprintf(list, sizeof list, "%s", cases ? cases : "");
  for (item = strtok_r(list, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) continue;
    *eq = 0;
    snprintf(line, sizeof line,
             "{\"t\":\"case\",\"rank\":%s,\"case\":\"%s\",\"n\":%s,\"ok\":true,\"checked\":%s,\"bad\":0,\"unwritten\":0,\"guard_hits\":0,\"max_abs_err\":0,\"max_rel_err\":0,\"first\":[]}\n",
             rank, item, eq + 1, eq + 1);
    if (write(ch, line, strlen(line)) < 0) _exit(0);
  }
  snprintf(line, sizeof line, "{\"t\":\"done\",\"rank\":%s}\n", rank);
  if (write(ch, line, strlen(line)) < 0) _exit(0);
  _exit(0);
}

void peer_access_matrix(int n, int *can_access) {
  (void)n;
  (void)can_access;
}
