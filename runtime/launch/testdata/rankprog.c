/* rankprog: a rank that misbehaves on request, for the launch tests.
 * Usage: rankprog SPEC [VAR...]
 * SPEC is a comma-separated list of rank=mode ("*" for every other rank), e.g. "1=crash,*=hang".
 * Modes: ok, hang, hangfork, crash, exit:N, flood:MB, longline, ignoreterm, env, rdzv, sleep:MS. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int my_rank(void) {
  const char *names[] = {"MGPU_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"};
  for (int i = 0; i < 4; i++) {
    const char *v = getenv(names[i]);
    if (v && *v) return atoi(v);
  }
  return 0;
}

static void mode_for(int rank, const char *spec, char *out, size_t n) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", spec);
  out[0] = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    char *eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = 0;
    if (strcmp(tok, "*") == 0 && out[0] == 0) snprintf(out, n, "%s", eq + 1);
    if (strcmp(tok, "*") != 0 && atoi(tok) == rank) { snprintf(out, n, "%s", eq + 1); return; }
  }
}

static void forever(void) { for (;;) pause(); }

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  int rank = my_rank();
  char mode[256];
  mode_for(rank, argv[1], mode, sizeof mode);
  printf("rank %d pid %d mode %s\n", rank, (int)getpid(), mode);
  fflush(stdout);
  if (strcmp(mode, "ok") == 0) {
    printf("rank %d ok\n", rank);
    return 0;
  }
  if (strcmp(mode, "hang") == 0) forever();
  if (strcmp(mode, "hangfork") == 0) {
    pid_t c = fork();
    if (c == 0) forever();
    printf("rank %d child %d\n", rank, (int)c);
    fflush(stdout);
    forever();
  }
  if (strcmp(mode, "crash") == 0) {
    usleep(200 * 1000);
    fprintf(stderr, "rank %d about to crash\n", rank);
    int *volatile p = NULL; /* the compiler cannot see it is null */
    *p = 1;
    return 0;
  }
  if (strncmp(mode, "exit:", 5) == 0) {
    usleep(100 * 1000);
    fprintf(stderr, "rank %d exits %d\n", rank, atoi(mode + 5));
    return atoi(mode + 5);
  }
  if (strncmp(mode, "sleep:", 6) == 0) {
    usleep(atoi(mode + 6) * 1000);
    return 0;
  }
  if (strncmp(mode, "flood:", 6) == 0) {
    long long total = atoll(mode + 6) << 20, done = 0;
    static char line[1000];
    memset(line, 'x', sizeof line);
    line[sizeof line - 1] = '\n';
    long long i = 0;
    while (done < total) {
      int k = snprintf(line, 40, "line %lld ", i++);
      line[k] = 'x';
      fwrite(line, 1, sizeof line, stdout);
      done += sizeof line;
    }
    printf("FLOOD-END rank %d\n", rank);
    return 0;
  }
  if (strcmp(mode, "longline") == 0) {
    for (int i = 0; i < (1 << 20); i++) putchar('y');
    printf("\nafter-long\n");
    return 0;
  }
  if (strcmp(mode, "ignoreterm") == 0) {
    signal(SIGTERM, SIG_IGN);
    printf("rank %d ignoring SIGTERM\n", rank);
    fflush(stdout);
    forever();
  }
  if (strcmp(mode, "env") == 0) {
    for (int i = 2; i < argc; i++) {
      const char *v = getenv(argv[i]);
      printf("%s=%s\n", argv[i], v ? v : "<unset>");
    }
    return 0;
  }
  if (strcmp(mode, "rdzv") == 0) {
    const char *d = getenv("MGPU_RDZV_DIR");
    struct stat st;
    if (!d || stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) {
      fprintf(stderr, "no rendezvous dir\n");
      return 3;
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/rank-%d", d, rank);
    FILE *f = fopen(p, "w");
    if (!f) return 4;
    fclose(f);
    printf("rdzv ok %s\n", d);
    return 0;
  }
  fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
