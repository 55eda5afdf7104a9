//go:build ignore

// The line above keeps the Go tool from compiling this C file into package csrc, which only
// embeds the harness sources (embed.go).

/*
 * mgpu_core.c — the CPU part of the harness: context from the environment, JSON-lines records,
 * file rendezvous, exact host values, element comparison.
 *
 * Pure C99 + POSIX. Builds with `cc -std=c11 -pthread` and with `nvcc -x c`. The CUDA part, when
 * linked, is reached through one weak hook (mgpu__cuda_setup); nothing here needs CUDA.
 */
#define _POSIX_C_SOURCE 200809L

#include "mgpu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Defined by mgpu_cuda.cu when it is linked; a null address otherwise. */
#if defined(__GNUC__) || defined(__clang__)
extern int mgpu__cuda_setup(mgpu_ctx *ctx, int select, char *gpu, size_t gpu_len)
    __attribute__((weak));
extern void mgpu__nccl_setup(void) __attribute__((weak));
extern size_t mgpu__nccl_watch_json(char *buf, size_t cap) __attribute__((weak));
#else
#pragma weak mgpu__cuda_setup
#pragma weak mgpu__nccl_setup
#pragma weak mgpu__nccl_watch_json
#endif

#define MGPU_HARNESS_ID "c/1"
#define MGPU_DEFAULT_SEED 0x6d6770756c65726eULL /* "mgpulern" */
#define MGPU_MAX_SHARE (64u * 1024u)

/* ---- process state --------------------------------------------------------------------- */

static struct {
  mgpu_ctx *ctx;
  FILE *out;          /* rank-<r>.jsonl */
  int rank;           /* known before ctx is complete, for error messages */
  int started;        /* start record written */
  int finished;       /* done record written */
  int failing;        /* inside mgpu_fail: no recursion */
  char run_dir[4096];
  char rdzv_dir[4096];
  char gpu[256];
  unsigned long barrier_seq;
  unsigned long share_seq;
  unsigned long gather_seq;
  double rdzv_timeout_s;
  /* What this rank recorded, for the done record's summary (docs/protocol.md §4). */
  long long nrecords, ncase_records, checked, timing_samples;
  /* The verifier (docs/protocol.md §4): this process is one; this rank is checked by one
   * (split), and then the keys of its own inputs and of the run's patterns. */
  int verifier, split;
  uint64_t rank_seed, pattern_seed;
  long long handed; /* outputs handed over (rank) or received (verifier) */
} g = {NULL, NULL, -1, 0, 0, 0, "", "", "", 0, 0, 0, 60.0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

mgpu_ctx *mgpu__ctx(void) { return g.ctx; }

/* ---- time ------------------------------------------------------------------------------ */

double mgpu_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double unix_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_us(long us) {
  struct timespec ts;
  ts.tv_sec = us / 1000000;
  ts.tv_nsec = (us % 1000000) * 1000;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- a growable JSON text buffer --------------------------------------------------------- */

typedef struct jbuf {
  char *p;
  size_t n, cap;
  int oom;
} jbuf;

static void jb_grow(jbuf *b, size_t more) {
  size_t want;
  char *np;
  if (b->oom) return;
  want = b->n + more + 1;
  if (want <= b->cap) return;
  if (want < 256) want = 256;
  if (want < 2 * b->cap) want = 2 * b->cap;
  np = (char *)realloc(b->p, want);
  if (!np) {
    b->oom = 1;
    return;
  }
  b->p = np;
  b->cap = want;
}

static void jb_mem(jbuf *b, const char *s, size_t len) {
  jb_grow(b, len);
  if (b->oom) return;
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = 0;
}

static void jb_raw(jbuf *b, const char *s) { jb_mem(b, s, strlen(s)); }

static void jb_fmt(jbuf *b, const char *fmt, ...) {
  char tmp[128];
  int k;
  va_list ap;
  va_start(ap, fmt);
  k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  if ((size_t)k >= sizeof tmp) k = (int)sizeof tmp - 1;
  jb_mem(b, tmp, (size_t)k);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the bytes there are not one. */
static int utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  int n, k;
  unsigned cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  for (k = 1; k < n; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[k] & 0x3F);
  }
  if (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return n;
}

/* A JSON string: quotes, escapes, control characters as \u00XX, invalid UTF-8 as U+FFFD. */
static void jb_str(jbuf *b, const char *s) {
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  jb_raw(b, "\"");
  while (*p) {
    unsigned c = *p;
    int n;
    switch (c) {
    case '"': jb_raw(b, "\\\""); p++; continue;
    case '\\': jb_raw(b, "\\\\"); p++; continue;
    case '\n': jb_raw(b, "\\n"); p++; continue;
    case '\r': jb_raw(b, "\\r"); p++; continue;
    case '\t': jb_raw(b, "\\t"); p++; continue;
    case '\b': jb_raw(b, "\\b"); p++; continue;
    case '\f': jb_raw(b, "\\f"); p++; continue;
    default: break;
    }
    if (c < 0x20 || c == 0x7F) {
      jb_fmt(b, "\\u%04x", c);
      p++;
      continue;
    }
    n = utf8_len(p);
    if (n == 0) {
      jb_raw(b, "\\ufffd");
      p++;
      continue;
    }
    jb_mem(b, (const char *)p, (size_t)n);
    p += n;
  }
  jb_raw(b, "\"");
}

/* A JSON number; NaN and infinities become null (JSON has no spelling for them). */
static void jb_num(jbuf *b, double v) {
  if (!isfinite(v)) {
    jb_raw(b, "null");
    return;
  }
  jb_fmt(b, "%.17g", v);
}

static void jb_key(jbuf *b, const char *k) {
  jb_raw(b, ",\"");
  jb_raw(b, k);
  jb_raw(b, "\":");
}

static void jb_kstr(jbuf *b, const char *k, const char *v) {
  jb_key(b, k);
  jb_str(b, v);
}
static void jb_kint(jbuf *b, const char *k, long long v) {
  jb_key(b, k);
  jb_fmt(b, "%lld", v);
}
static void jb_knum(jbuf *b, const char *k, double v) {
  jb_key(b, k);
  jb_num(b, v);
}

static void rec_begin(jbuf *b, const char *type) {
  memset(b, 0, sizeof *b);
  jb_raw(b, "{\"t\":");
  jb_str(b, type);
  jb_kint(b, "rank", g.rank);
  jb_key(b, "ts");
  jb_fmt(b, "%.6f", unix_seconds());
}

static void write_start_locked(void);

/* Records go to the checker's channel when there is one, else to the rank's file. */
static int have_sink(void) { return g.out != NULL || mgpu__chan_active(); }

/* Writes one complete record (json without its newline); g_lock is held. */
static void emit_locked(const char *json, size_t n) {
  g.nrecords++;
  if (mgpu__chan_active()) {
    if (mgpu__chan_send(json, n) != 0) {
      /* The checker is gone (it tore the job down): nobody reads what follows. */
      fprintf(stderr, "[rank %d] mgpu harness: the records channel closed\n", g.rank);
      _exit(1);
    }
    return;
  }
  if (g.out) {
    fwrite(json, 1, n, g.out);
    fputc('\n', g.out);
    fflush(g.out);
  }
}

/* Ends the record and writes it as one line. */
static void rec_end(jbuf *b) {
  jb_raw(b, "}");
  pthread_mutex_lock(&g_lock);
  if (!g.started && have_sink()) write_start_locked();
  if (have_sink() && !b->oom) emit_locked(b->p, b->n);
  pthread_mutex_unlock(&g_lock);
  free(b->p);
  b->p = NULL;
}

/* ---- failure --------------------------------------------------------------------------- */

static const char *base_name(const char *path) {
  const char *s;
  if (!path) return "";
  s = strrchr(path, '/');
  return s ? s + 1 : path;
}

void mgpu_fail(const char *where, const char *call, const char *file, int line, long code,
               const char *msg) {
  jbuf b;
  if (g.failing) _exit(1);
  g.failing = 1;
  if (!where) where = "harness";
  if (!call) call = "";
  if (!file) file = "";
  if (!msg) msg = "";
  if (have_sink()) {
    rec_begin(&b, "error");
    jb_kstr(&b, "where", where);
    jb_kstr(&b, "call", call);
    jb_kstr(&b, "file", file);
    jb_kint(&b, "line", line);
    jb_kint(&b, "code", code);
    jb_kstr(&b, "msg", msg);
    rec_end(&b);
  }
  if (g.rank >= 0)
    fprintf(stderr, "[rank %d] %s failed at %s:%d: %s\n", g.rank, call, file, line, msg);
  else
    fprintf(stderr, "[rank ?] %s failed at %s:%d: %s\n", call, file, line, msg);
  fflush(stderr);
  if (g.out) {
    fflush(g.out);
    fsync(fileno(g.out));
  }
  /* _exit: no atexit handlers, no library destructors that could hang on a dead peer. */
  _exit(1);
}

/* mgpu_fail with a formatted message. */
static void fail_fmt(const char *where, int line, const char *call, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  mgpu_fail(where, call, __FILE__, line, 0, msg);
}
#define HFAIL(call, ...) fail_fmt("harness", __LINE__, call, __VA_ARGS__)

const char *mgpu_where_for(const char *file) {
  const char *list = getenv("MGPU_LEARNER_FILES");
  const char *bn = base_name(file);
  size_t bl = strlen(bn);
  const char *p;
  if (!list || !*list || bl == 0) return "driver";
  p = list;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    const char *item = p;
    size_t il = len;
    /* entries may carry a path and surrounding spaces: compare basenames */
    while (il > 0 && (*item == ' ' || *item == '\t')) item++, il--;
    while (il > 0 && (item[il - 1] == ' ' || item[il - 1] == '\t')) il--;
    {
      size_t k = il;
      while (k > 0 && item[k - 1] != '/') k--;
      item += k;
      il -= k;
    }
    if (il == bl && memcmp(item, bn, bl) == 0) return "learner";
    if (!e) break;
    p = e + 1;
  }
  return "driver";
}

int mgpu__env_flag(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

/* ---- environment ----------------------------------------------------------------------- */

/* First set variable among names; NULL when none. *which gets its name. */
static const char *env_first(const char *const *names, const char **which) {
  int i;
  for (i = 0; names[i]; i++) {
    const char *v = getenv(names[i]);
    if (v && *v) {
      if (which) *which = names[i];
      return v;
    }
  }
  return NULL;
}

static int parse_ll(const char *s, long long *out) {
  char *end;
  long long v;
  if (!s || !*s) return 0;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno || end == s) return 0;
  while (*end == ' ' || *end == '\t') end++;
  if (*end) return 0;
  *out = v;
  return 1;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v;
  if (!s || !*s) return 0;
  while (*s == ' ') s++;
  if (*s == '-') return 0;
  errno = 0;
  v = strtoull(s, &end, 0);
  if (errno || end == s) return 0;
  while (*end == ' ' || *end == '\t') end++;
  if (*end) return 0;
  *out = (uint64_t)v;
  return 1;
}

static int env_int(const char *const *names, int fallback, int min) {
  const char *which = NULL;
  const char *v = env_first(names, &which);
  long long x;
  if (!v) return fallback;
  if (!parse_ll(v, &x) || x < min || x > 1000000)
    HFAIL("mgpu_init", "environment variable %s=\"%s\" is not an integer >= %d", which, v, min);
  return (int)x;
}

/* name=n;name=n;... Empty string: no cases. */
static int parse_cases(const char *var, const char *s, mgpu_case *cases) {
  int n = 0;
  const char *p = s;
  if (!s) return 0;
  while (*p) {
    const char *e = strchr(p, ';');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    const char *eq;
    char item[256], num[64];
    size_t nl;
    long long v;
    if (len == 0) { /* tolerate ";;" and a trailing ";" */
      p += e ? 1 : 0;
      if (!e) break;
      continue;
    }
    if (len >= sizeof item) HFAIL("mgpu_init", "%s: case \"%.40s...\" is too long", var, p);
    memcpy(item, p, len);
    item[len] = 0;
    eq = strchr(item, '=');
    if (!eq) HFAIL("mgpu_init", "%s: \"%s\" is not name=n", var, item);
    nl = (size_t)(eq - item);
    if (nl == 0 || nl >= sizeof cases[0].name)
      HFAIL("mgpu_init", "%s: case name in \"%s\" is empty or longer than %d bytes", var, item,
            (int)sizeof cases[0].name - 1);
    if (strlen(eq + 1) >= sizeof num || !parse_ll(eq + 1, &v) || v < 0)
      HFAIL("mgpu_init", "%s: \"%s\": n must be a non-negative integer", var, item);
    if (n >= MGPU_MAX_CASES) HFAIL("mgpu_init", "%s: more than %d cases", var, MGPU_MAX_CASES);
    memcpy(cases[n].name, item, nl);
    cases[n].name[nl] = 0;
    cases[n].n = v;
    n++;
    if (!e) break;
    p = e + 1;
  }
  return n;
}

static void mkdir_p(const char *path) {
  char tmp[4096];
  size_t i, len = strlen(path);
  if (len == 0 || len >= sizeof tmp) return;
  memcpy(tmp, path, len + 1);
  for (i = 1; i < len; i++) {
    if (tmp[i] == '/') {
      tmp[i] = 0;
      mkdir(tmp, 0777);
      tmp[i] = '/';
    }
  }
  mkdir(tmp, 0777);
}

static void write_start_locked(void) {
  jbuf b;
  mgpu_ctx *c = g.ctx;
  memset(&b, 0, sizeof b);
  jb_raw(&b, "{\"t\":\"start\"");
  jb_kint(&b, "rank", g.rank);
  jb_key(&b, "ts");
  jb_fmt(&b, "%.6f", unix_seconds());
  jb_kint(&b, "world", c ? c->world : 0);
  jb_kint(&b, "local_rank", c ? c->local_rank : 0);
  jb_kint(&b, "device", c ? c->device : -1);
  jb_kstr(&b, "gpu", g.gpu);
  jb_kint(&b, "pid", (long long)getpid());
  jb_kstr(&b, "harness", MGPU_HARNESS_ID);
  jb_kstr(&b, "exercise", c && c->exercise ? c->exercise : "");
  jb_kint(&b, "num_devices", c ? c->num_devices : 0);
  jb_kint(&b, "channel", mgpu__chan_active());
  jb_raw(&b, "}");
  g.started = 1;
  if (!b.oom) emit_locked(b.p, b.n);
  free(b.p);
}

static void init_common(mgpu_ctx *ctx, int argc, char **argv, int select_device) {
  static const char *const k_rank[] = {"MGPU_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK",
                                       NULL};
  static const char *const k_world[] = {"MGPU_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                        "WORLD_SIZE", NULL};
  static const char *const k_lrank[] = {"MGPU_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "MPI_LOCALRANKID", "LOCAL_RANK", NULL};
  static const char *const k_lworld[] = {"MGPU_LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                         "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE", NULL};
  static const char *const k_min[] = {"MGPU_PERF_MIN_REPS", NULL};
  static const char *const k_max[] = {"MGPU_PERF_MAX_REPS", NULL};
  const char *v;
  char path[4200];
  int standalone = 0;
  (void)argc;
  (void)argv;

  if (!ctx) {
    fprintf(stderr, "mgpu_init: ctx is NULL\n");
    _exit(1);
  }
  if (g.ctx) HFAIL("mgpu_init", "mgpu_init called twice");
  memset(ctx, 0, sizeof *ctx);
  ctx->device = -1;

  /* Rank first, so that every later failure names it and lands in this rank's file. */
  ctx->rank = env_int(k_rank, 0, 0);
  g.rank = ctx->rank;

  v = getenv("MGPU_RUN_DIR");
  if (v && *v) {
    snprintf(g.run_dir, sizeof g.run_dir, "%s", v);
  } else {
    snprintf(g.run_dir, sizeof g.run_dir, "mgpu-results");
    standalone = 1;
  }
  mkdir_p(g.run_dir);
  snprintf(path, sizeof path, "%s/rank-%d.jsonl", g.run_dir, ctx->rank);
  if (!mgpu__chan_active()) {
    g.out = fopen(path, "w");
    if (!g.out) {
      fprintf(stderr, "[rank %d] mgpu_init failed: cannot create %s: %s\n", ctx->rank, path,
              strerror(errno));
      _exit(1);
    }
  }
  g.ctx = ctx; /* from here on, failures write records (a start record first) */
  ctx->run_dir = g.run_dir;
  if (standalone && !mgpu__chan_active())
    fprintf(stderr,
            "[rank %d] MGPU_RUN_DIR is not set: running standalone, records go to %s\n",
            ctx->rank, path);

  ctx->world = env_int(k_world, 1, 1);
  ctx->local_rank = env_int(k_lrank, ctx->rank, 0);
  ctx->local_world = env_int(k_lworld, ctx->world, 1);
  if (ctx->rank >= ctx->world)
    HFAIL("mgpu_init", "rank %d is not below world size %d", ctx->rank, ctx->world);
  if (ctx->local_rank >= ctx->local_world)
    HFAIL("mgpu_init", "local rank %d is not below local world size %d", ctx->local_rank,
          ctx->local_world);

  v = getenv("MGPU_EXERCISE");
  ctx->exercise = v ? v : "";

  v = getenv("MGPU_RDZV_DIR");
  if (v && *v) {
    snprintf(g.rdzv_dir, sizeof g.rdzv_dir, "%s", v);
  } else if (ctx->world > 1) {
    /* By hand under a launcher: a directory unique to the launcher's job, if it names one. */
    static const char *const k_job[] = {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                                        "TORCHELASTIC_RUN_ID", NULL};
    const char *job = env_first(k_job, NULL);
    if (job) {
      size_t i, n;
      snprintf(g.rdzv_dir, sizeof g.rdzv_dir, "/tmp/mgpu-rdzv-%s", job);
      n = strlen(g.rdzv_dir);
      for (i = strlen("/tmp/"); i < n; i++) {
        char c = g.rdzv_dir[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
          g.rdzv_dir[i] = '_';
      }
    }
  }
  if (!g.rdzv_dir[0] && ctx->world == 1) /* nobody to meet: any private directory will do */
    snprintf(g.rdzv_dir, sizeof g.rdzv_dir, "%.4000s/rdzv", g.run_dir);
  if (g.rdzv_dir[0]) mkdir_p(g.rdzv_dir);
  ctx->rdzv_dir = g.rdzv_dir[0] ? g.rdzv_dir : NULL;
  {
    static const char *const k_to[] = {"MGPU_RDZV_TIMEOUT_S", NULL};
    g.rdzv_timeout_s = env_int(k_to, 60, 1);
  }

  v = getenv("MGPU_SEED");
  g.verifier = mgpu__chan_verifier();
  g.split = mgpu__chan_split(&g.rank_seed, &g.pattern_seed) || g.verifier;
  if (g.split && !g.verifier) {
    /* A split rank knows the keys of its own inputs only: the seed, and with it every other
     * rank's inputs and every expected value, stays with the verifier. */
    ctx->seed = 0;
  } else if (mgpu__chan_active()) {
    ctx->seed = mgpu__chan_seed(); /* only the channel carries it: not in the environment */
  } else if (v && *v) {
    if (!parse_u64(v, &ctx->seed))
      HFAIL("mgpu_init", "MGPU_SEED=\"%s\" is not an unsigned 64-bit integer", v);
  } else {
    ctx->seed = MGPU_DEFAULT_SEED;
  }

  ctx->ncases = parse_cases("MGPU_CASES", getenv("MGPU_CASES"), ctx->cases);
  ctx->perf = mgpu__env_flag("MGPU_PERF");
  ctx->nperf_cases = parse_cases("MGPU_PERF_CASES", getenv("MGPU_PERF_CASES"), ctx->perf_cases);
  v = getenv("MGPU_PERF_BUDGET_MS");
  if (v && *v) {
    char *end;
    errno = 0;
    ctx->perf_budget_ms = strtod(v, &end);
    if (errno || end == v || *end || !(ctx->perf_budget_ms >= 0))
      HFAIL("mgpu_init", "MGPU_PERF_BUDGET_MS=\"%s\" is not a non-negative number", v);
  }
  ctx->min_reps = env_int(k_min, 0, 0);
  ctx->max_reps = env_int(k_max, 0, 0);
  if (ctx->max_reps > 0 && ctx->min_reps > ctx->max_reps)
    HFAIL("mgpu_init", "MGPU_PERF_MIN_REPS=%d is above MGPU_PERF_MAX_REPS=%d", ctx->min_reps,
          ctx->max_reps);
  v = getenv("MGPU_FAULT");
  ctx->fault = (v && *v) ? v : NULL;
  if (ctx->fault) {
    double ms;
    mgpu_fault_kill_rank(ctx, &ms); /* validates the syntax early */
  }

  /* A verifier never touches a GPU: it only compares what its rank handed over. */
  if (mgpu__cuda_setup && !g.verifier)
    mgpu__cuda_setup(ctx, select_device, g.gpu, sizeof g.gpu);
  /* NCCL's watch, before the driver creates a communicator (mgpu_nccl.cu). */
  if (mgpu__nccl_setup && !g.verifier) mgpu__nccl_setup();

  pthread_mutex_lock(&g_lock);
  if (!g.started) write_start_locked();
  pthread_mutex_unlock(&g_lock);
}

void mgpu_init(mgpu_ctx *ctx, int argc, char **argv) { init_common(ctx, argc, argv, 1); }

void mgpu_init_nodevice(mgpu_ctx *ctx, int argc, char **argv) {
  init_common(ctx, argc, argv, 0);
}

int mgpu_finish(mgpu_ctx *ctx) {
  jbuf b;
  (void)ctx;
  if (!have_sink() || !g.ctx) {
    fprintf(stderr, "mgpu_finish: mgpu_init was not called\n");
    return 1;
  }
  if (g.finished) return 0;
  if (mgpu__code_changed())
    mgpu_fail("policy", "code integrity", __FILE__, __LINE__, 0,
              "the program's machine code changed while it ran (something rewrote code in "
              "memory, the harness's or the driver's included); results of such a run are not "
              "trusted");
  rec_begin(&b, "done");
  /* What this rank recorded before done: the checker compares it with what it received. */
  jb_key(&b, "summary");
  pthread_mutex_lock(&g_lock);
  jb_fmt(&b,
         "{\"records\":%lld,\"cases\":%lld,\"checked\":%lld,\"timing_samples\":%lld,"
         "\"handed\":%lld}",
         g.nrecords, g.ncase_records, g.checked, g.timing_samples, g.handed);
  pthread_mutex_unlock(&g_lock);
  if (mgpu__nccl_watch_json && !g.verifier) {
    /* What NCCL's profiler saw this rank ask for, the driver's calls and everyone else's. */
    char w[2048];
    size_t n = mgpu__nccl_watch_json(w, sizeof w);
    if (n >= sizeof w) snprintf(w, sizeof w, "{\"error\":\"the watch's counts do not fit\"}");
    if (n > 0) {
      jb_key(&b, "nccl");
      jb_raw(&b, w);
    }
  }
  rec_end(&b);
  pthread_mutex_lock(&g_lock);
  g.finished = 1;
  if (g.out) {
    fflush(g.out);
    fsync(fileno(g.out));
    fclose(g.out);
    g.out = NULL;
  }
  mgpu__chan_close();
  pthread_mutex_unlock(&g_lock);
  return 0;
}

/* kill:rank=R:after_ms=T. Returns R (and *after_ms = T) for a kill fault, -1 when no fault. */
int mgpu_fault_kill_rank(const mgpu_ctx *ctx, double *after_ms) {
  const char *f = ctx ? ctx->fault : NULL;
  char buf[256];
  char *tok, *save = NULL;
  long long rank = -1;
  double ms = 0;
  int have_rank = 0;
  if (after_ms) *after_ms = 0;
  if (!f || !*f) return -1;
  if (strlen(f) >= sizeof buf) HFAIL("mgpu_fault_kill_rank", "MGPU_FAULT is too long");
  strcpy(buf, f);
  tok = strtok_r(buf, ":", &save);
  if (!tok || strcmp(tok, "kill") != 0)
    HFAIL("mgpu_fault_kill_rank", "MGPU_FAULT=\"%s\": only kill:rank=R[:after_ms=T] is known", f);
  while ((tok = strtok_r(NULL, ":", &save)) != NULL) {
    if (strncmp(tok, "rank=", 5) == 0) {
      if (!parse_ll(tok + 5, &rank) || rank < 0)
        HFAIL("mgpu_fault_kill_rank", "MGPU_FAULT=\"%s\": bad rank", f);
      have_rank = 1;
    } else if (strncmp(tok, "after_ms=", 9) == 0) {
      char *end;
      errno = 0;
      ms = strtod(tok + 9, &end);
      if (errno || end == tok + 9 || *end || !(ms >= 0))
        HFAIL("mgpu_fault_kill_rank", "MGPU_FAULT=\"%s\": bad after_ms", f);
    } else {
      HFAIL("mgpu_fault_kill_rank", "MGPU_FAULT=\"%s\": unknown field \"%s\"", f, tok);
    }
  }
  if (!have_rank) HFAIL("mgpu_fault_kill_rank", "MGPU_FAULT=\"%s\": rank= is missing", f);
  if (after_ms) *after_ms = ms;
  return (int)rank;
}

/* ---- free-form records ----------------------------------------------------------------- */

void mgpu_note(const char *fmt, ...) {
  char msg[4096];
  jbuf b;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt ? fmt : "", ap);
  va_end(ap);
  rec_begin(&b, "note");
  jb_kstr(&b, "msg", msg);
  rec_end(&b);
}

void mgpu_value(const char *name, double value, const char *unit) {
  jbuf b;
  rec_begin(&b, "value");
  jb_kstr(&b, "name", name);
  jb_knum(&b, "value", value);
  jb_kstr(&b, "unit", unit ? unit : "");
  rec_end(&b);
}

long long mgpu_case_n(const mgpu_ctx *ctx, const char *name, long long fallback) {
  int i;
  if (!ctx || !name) return fallback;
  for (i = 0; i < ctx->ncases; i++)
    if (strcmp(ctx->cases[i].name, name) == 0) return ctx->cases[i].n;
  for (i = 0; i < ctx->nperf_cases; i++)
    if (strcmp(ctx->perf_cases[i].name, name) == 0) return ctx->perf_cases[i].n;
  return fallback;
}

/* ---- results --------------------------------------------------------------------------- */

void mgpu_result_init(mgpu_result *r, long long n) {
  memset(r, 0, sizeof *r);
  r->n = n;
}

/* Poison is 0xFF bytes: a negative NaN whose mantissa is all ones. Widened from float, half or
 * bfloat16, the ones stay at the top of the double's mantissa with zeros below. */
static int is_poison(double v) {
  uint64_t u, m, inv;
  memcpy(&u, &v, sizeof u);
  if ((u >> 52) != 0xFFFu) return 0; /* sign and exponent all ones */
  m = u & 0x000FFFFFFFFFFFFFULL;
  if (!(m >> 51)) return 0;
  inv = (~m) & 0x000FFFFFFFFFFFFFULL; /* must be 0...01...1 */
  return (inv & (inv + 1)) == 0 && m >> 45 == 0x7F; /* at least 7 ones (bfloat16) */
}

static void fmt_value(char *out, size_t len, double v, int poison) {
  if (poison) {
    snprintf(out, len, "NaN(poison)");
  } else if (isnan(v)) {
    snprintf(out, len, "NaN");
  } else if (isinf(v)) {
    snprintf(out, len, v > 0 ? "inf" : "-inf");
  } else if ((double)(float)v == v) {
    snprintf(out, len, "%.9g", v);
  } else {
    snprintf(out, len, "%.17g", v);
  }
}

void mgpu_result_add(mgpu_result *r, long long i, double got, double want, double tol) {
  int match, unwritten = 0;
  double err;
  r->checked++;
  if (got == want || (isnan(got) && isnan(want))) {
    match = 1;
    err = 0;
  } else if (isnan(got)) {
    match = 0;
    unwritten = is_poison(got);
    err = NAN;
  } else {
    err = fabs(got - want);
    match = err <= tol; /* false for NaN want or an infinite error */
  }
  if (isfinite(err) || isinf(err)) {
    if (err > r->max_abs_err) r->max_abs_err = err;
    if (want != 0 && isfinite(want)) { /* relative error is left out where want is 0 */
      double rel = err / fabs(want);
      if (rel > r->max_rel_err) r->max_rel_err = rel;
    }
  }
  if (match) return;
  if (unwritten)
    r->unwritten++;
  else
    r->bad++;
  if (r->nfirst < 8) {
    mgpu_mismatch *m = &r->first[r->nfirst++];
    m->i = i;
    fmt_value(m->got, sizeof m->got, got, unwritten);
    fmt_value(m->want, sizeof m->want, want, 0);
  }
}

int mgpu_record_case(const char *case_name, const mgpu_result *r, int force_fail) {
  jbuf b;
  int k;
  int ok = r->bad == 0 && r->unwritten == 0 && r->guard_hits == 0 && !force_fail;
  if (g.split && !g.verifier)
    mgpu_fail("driver", "mgpu_record_case", __FILE__, __LINE__, 0,
              "a rank whose outputs a verifier checks records no cases: the driver's check "
              "must sit behind mgpu_verifies()");
  pthread_mutex_lock(&g_lock);
  g.ncase_records++;
  g.checked += r->checked;
  pthread_mutex_unlock(&g_lock);
  rec_begin(&b, "case");
  jb_kstr(&b, "case", case_name ? case_name : "");
  jb_kint(&b, "n", r->n);
  jb_key(&b, "ok");
  jb_raw(&b, ok ? "true" : "false");
  jb_kint(&b, "checked", r->checked);
  jb_kint(&b, "bad", r->bad);
  jb_kint(&b, "unwritten", r->unwritten);
  jb_kint(&b, "guard_hits", r->guard_hits);
  jb_knum(&b, "max_abs_err", r->max_abs_err);
  jb_knum(&b, "max_rel_err", r->max_rel_err);
  jb_key(&b, "first");
  jb_raw(&b, "[");
  for (k = 0; k < r->nfirst && k < 8; k++) {
    char tmp[40];
    if (k) jb_raw(&b, ",");
    jb_fmt(&b, "{\"i\":%lld,\"got\":", r->first[k].i);
    memcpy(tmp, r->first[k].got, sizeof r->first[k].got);
    tmp[sizeof r->first[k].got] = 0;
    jb_str(&b, tmp);
    jb_raw(&b, ",\"want\":");
    memcpy(tmp, r->first[k].want, sizeof r->first[k].want);
    tmp[sizeof r->first[k].want] = 0;
    jb_str(&b, tmp);
    jb_raw(&b, "}");
  }
  jb_raw(&b, "]");
  if (r->msg[0]) {
    char tmp[sizeof r->msg + 1];
    memcpy(tmp, r->msg, sizeof r->msg);
    tmp[sizeof r->msg] = 0;
    jb_kstr(&b, "msg", tmp);
  }
  rec_end(&b);
  return ok;
}

void mgpu_record_timing(const char *case_name, const char *who, double bytes, double factor,
                        const char *metric, const double *us, const double *wall_us, int n) {
  jbuf b;
  int k;
  pthread_mutex_lock(&g_lock);
  g.timing_samples += n;
  pthread_mutex_unlock(&g_lock);
  rec_begin(&b, "timing");
  jb_kstr(&b, "case", case_name ? case_name : "");
  jb_kstr(&b, "who", who ? who : "");
  jb_knum(&b, "bytes", bytes);
  jb_knum(&b, "factor", factor);
  jb_kstr(&b, "metric", metric ? metric : "busbw");
  jb_key(&b, "us");
  jb_raw(&b, "[");
  for (k = 0; k < n; k++) {
    if (k) jb_raw(&b, ",");
    jb_num(&b, us ? us[k] : NAN);
  }
  jb_raw(&b, "]");
  jb_key(&b, "wall_us");
  jb_raw(&b, "[");
  for (k = 0; k < n; k++) {
    if (k) jb_raw(&b, ",");
    jb_num(&b, wall_us ? wall_us[k] : NAN);
  }
  jb_raw(&b, "]");
  rec_end(&b);
}

/* ---- rendezvous ------------------------------------------------------------------------ */

static void sanitize(char *out, size_t len, const char *in) {
  size_t i = 0;
  if (!in) in = "";
  for (; *in && i + 1 < len; in++) {
    char c = *in;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '-' || c == '_' || c == '.';
    out[i++] = ok ? c : '_';
  }
  out[i] = 0;
  if (i == 0) snprintf(out, len, "_");
}

static const char *rdzv_dir_or_fail(const mgpu_ctx *ctx, const char *call) {
  if (ctx->rdzv_dir && *ctx->rdzv_dir) return ctx->rdzv_dir;
  HFAIL(call, "MGPU_RDZV_DIR is not set and %d ranks need a rendezvous: set it to a fresh empty "
              "directory shared by all ranks",
        ctx->world);
  return NULL;
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Polling with a short backoff. Barriers and gathers (which precede timed samples) start at
 * 20 µs and stay at or below 200 µs, so ranks leave within a few hundred µs of each other;
 * shares start at 50 µs and back off to 1 ms. */
typedef struct poller {
  long sleep_us, cap_us;
  double deadline_us;
} poller;

static void poller_init(poller *p, long start_us, long cap_us) {
  p->sleep_us = start_us;
  p->cap_us = cap_us;
  p->deadline_us = mgpu_now_us() + g.rdzv_timeout_s * 1e6;
}

/* Returns 0 once the deadline has passed. */
static int poller_wait(poller *p) {
  if (mgpu_now_us() > p->deadline_us) return 0;
  sleep_us(p->sleep_us);
  if (p->sleep_us < p->cap_us) p->sleep_us = p->sleep_us * 2 > p->cap_us ? p->cap_us : p->sleep_us * 2;
  return 1;
}

static void touch_file(const char *path, const char *call) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0) HFAIL(call, "cannot create %s: %s", path, strerror(errno));
  close(fd);
}

/* A verifier meets nobody: a driver that reaches a rendezvous there has a check outside
 * mgpu_verifies() or work outside mgpu_computes(). */
static void no_rdzv_in_verifier(const char *call) {
  if (g.verifier)
    HFAIL(call, "the driver reached a rendezvous in the verifier (rendezvous belong behind "
                "mgpu_computes())");
}

void mgpu_barrier(mgpu_ctx *ctx, const char *tag) {
  const char *dir;
  char t[96], path[4400];
  unsigned long seq;
  int r, waiting_for = -1;
  poller p;
  no_rdzv_in_verifier("mgpu_barrier");
  if (!ctx) ctx = g.ctx;
  if (!ctx) HFAIL("mgpu_barrier", "mgpu_init was not called");
  if (ctx->world <= 1) return;
  dir = rdzv_dir_or_fail(ctx, "mgpu_barrier");
  sanitize(t, sizeof t, tag);
  pthread_mutex_lock(&g_lock);
  seq = ++g.barrier_seq;
  pthread_mutex_unlock(&g_lock);
  snprintf(path, sizeof path, "%s/barrier-%s-%lu-%d", dir, t, seq, ctx->rank);
  touch_file(path, "mgpu_barrier");
  poller_init(&p, 20, 200);
  for (r = 0; r < ctx->world; r++) {
    if (r == ctx->rank) continue;
    snprintf(path, sizeof path, "%s/barrier-%s-%lu-%d", dir, t, seq, r);
    while (!file_exists(path)) {
      if (!poller_wait(&p)) {
        waiting_for = r;
        break;
      }
    }
    if (waiting_for >= 0) break;
  }
  if (waiting_for >= 0)
    HFAIL("mgpu_barrier",
          "barrier \"%s\" (#%lu): rank %d did not arrive within %.0f s (crashed, hung, or at a "
          "different barrier)",
          tag ? tag : "", seq, waiting_for, g.rdzv_timeout_s);
  /* Every rank has arrived at this barrier, so every rank has left the previous one: this
   * rank's file of the previous barrier is no longer looked at and can go. */
  {
    static char prev[4400];
    if (prev[0]) unlink(prev);
    snprintf(prev, sizeof prev, "%s/barrier-%s-%lu-%d", dir, t, seq, ctx->rank);
  }
}

void mgpu_share(mgpu_ctx *ctx, const char *key, void *buf, size_t len, int root) {
  const char *dir;
  char k[96], path[4400], tmp[4500];
  unsigned long seq;
  no_rdzv_in_verifier("mgpu_share");
  if (!ctx) ctx = g.ctx;
  if (!ctx) HFAIL("mgpu_share", "mgpu_init was not called");
  if (len > MGPU_MAX_SHARE)
    HFAIL("mgpu_share", "key \"%s\": %zu bytes is more than the %u-byte limit", key ? key : "",
          len, MGPU_MAX_SHARE);
  if (root < 0 || root >= ctx->world)
    HFAIL("mgpu_share", "key \"%s\": root %d is not a rank of this run", key ? key : "", root);
  if (ctx->world <= 1) return;
  if (len > 0 && !buf) HFAIL("mgpu_share", "key \"%s\": buffer is NULL", key ? key : "");
  dir = rdzv_dir_or_fail(ctx, "mgpu_share");
  sanitize(k, sizeof k, key);
  pthread_mutex_lock(&g_lock);
  seq = ++g.share_seq;
  pthread_mutex_unlock(&g_lock);
  snprintf(path, sizeof path, "%s/share-%s-%lu", dir, k, seq);
  if (ctx->rank == root) {
    FILE *f;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, ctx->rank);
    f = fopen(tmp, "wb");
    if (!f) HFAIL("mgpu_share", "cannot create %s: %s", tmp, strerror(errno));
    if (len && fwrite(buf, 1, len, f) != len) HFAIL("mgpu_share", "cannot write %s", tmp);
    if (fclose(f) != 0) HFAIL("mgpu_share", "cannot write %s: %s", tmp, strerror(errno));
    if (rename(tmp, path) != 0)
      HFAIL("mgpu_share", "cannot rename %s: %s", tmp, strerror(errno));
  } else {
    poller p;
    FILE *f;
    struct stat st;
    poller_init(&p, 50, 1000);
    while (stat(path, &st) != 0) {
      if (!poller_wait(&p))
        HFAIL("mgpu_share",
              "key \"%s\" (#%lu): rank %d did not publish it within %.0f s (crashed, hung, or "
              "sharing a different key)",
              key ? key : "", seq, root, g.rdzv_timeout_s);
    }
    if ((size_t)st.st_size != len)
      HFAIL("mgpu_share", "key \"%s\": rank %d shared %lld bytes, this rank expects %zu",
            key ? key : "", root, (long long)st.st_size, len);
    f = fopen(path, "rb");
    if (!f) HFAIL("mgpu_share", "cannot open %s: %s", path, strerror(errno));
    if (len && fread(buf, 1, len, f) != len) HFAIL("mgpu_share", "short read of %s", path);
    fclose(f);
  }
}

/* All ranks contribute `len` bytes; all[r*len ...] receives rank r's. Collective: every rank
 * calls it with the same tag and len, in the same order. world == 1 copies. */
void mgpu__gather(mgpu_ctx *ctx, const char *tag, const void *mine, size_t len, void *all) {
  static char prev[4400];
  const char *dir;
  char t[96], path[4400], tmp[4500];
  unsigned long seq;
  no_rdzv_in_verifier("mgpu__gather");
  int r;
  poller p;
  FILE *f;
  if (!ctx) ctx = g.ctx;
  if (!ctx) HFAIL("mgpu_gather", "mgpu_init was not called");
  if (len) memcpy((char *)all + (size_t)ctx->rank * len, mine, len);
  if (ctx->world <= 1) return;
  dir = rdzv_dir_or_fail(ctx, "mgpu_gather");
  sanitize(t, sizeof t, tag);
  pthread_mutex_lock(&g_lock);
  seq = ++g.gather_seq;
  pthread_mutex_unlock(&g_lock);
  snprintf(path, sizeof path, "%s/gather-%s-%lu-%d", dir, t, seq, ctx->rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  f = fopen(tmp, "wb");
  if (!f) HFAIL("mgpu_gather", "cannot create %s: %s", tmp, strerror(errno));
  if (len && fwrite(mine, 1, len, f) != len) HFAIL("mgpu_gather", "cannot write %s", tmp);
  if (fclose(f) != 0 || rename(tmp, path) != 0)
    HFAIL("mgpu_gather", "cannot publish %s: %s", path, strerror(errno));
  poller_init(&p, 20, 200);
  for (r = 0; r < ctx->world; r++) {
    struct stat st;
    if (r == ctx->rank) continue;
    snprintf(path, sizeof path, "%s/gather-%s-%lu-%d", dir, t, seq, r);
    while (stat(path, &st) != 0) {
      if (!poller_wait(&p))
        HFAIL("mgpu_gather",
              "\"%s\" (#%lu): rank %d did not arrive within %.0f s (crashed, hung, or elsewhere)",
              tag ? tag : "", seq, r, g.rdzv_timeout_s);
    }
    if ((size_t)st.st_size != len)
      HFAIL("mgpu_gather", "\"%s\": rank %d sent %lld bytes, expected %zu", tag ? tag : "", r,
            (long long)st.st_size, len);
    f = fopen(path, "rb");
    if (!f) HFAIL("mgpu_gather", "cannot open %s: %s", path, strerror(errno));
    if (len && fread((char *)all + (size_t)r * len, 1, len, f) != len)
      HFAIL("mgpu_gather", "short read of %s", path);
    fclose(f);
  }
  if (prev[0]) unlink(prev);
  snprintf(prev, sizeof prev, "%s/gather-%s-%lu-%d", dir, t, seq, ctx->rank);
}

/* ---- exact data ------------------------------------------------------------------------ */

/* splitmix64's finalizer with its increment; the same function is used on the GPU and in the
 * Python twin, so the three agree bit for bit (docs/harness.md spells it out). */
static uint64_t mix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* The per-rank hash of a rank's data, oneway("mgpu exact rank", seed, rank): one-way, so that
 * a rank's hash says nothing of the seed or another rank's. In a split rank the checker sent it
 * for the rank's own rank (rank_seed) instead of the seed, so the values are the same as
 * everywhere else; asking for another rank's there fails the driver with `why`. */
static uint64_t rank_hash(uint64_t seed, int rank, const char *call, const char *why) {
  if (g.split && !g.verifier) {
    if (rank != g.rank) mgpu_fail("driver", call, __FILE__, __LINE__, 0, why);
    return g.rank_seed;
  }
  return mgpu__oneway64("mgpu exact rank", seed, (uint64_t)(uint32_t)rank);
}

uint64_t mgpu_exact_key(uint64_t seed, int rank, int iter) {
  uint64_t h = rank_hash(seed, rank, "mgpu_exact_key",
                         "a rank whose outputs a verifier checks knows its own inputs only: the "
                         "other ranks' inputs (and the expected values made of them) belong "
                         "behind mgpu_verifies()");
  return mix64(h ^ (uint64_t)(uint32_t)iter);
}

/* A rank's own byte patterns: from the same per-rank hash as its exact inputs, so a split rank
 * can make its own and no other rank's. */
uint64_t mgpu_rank_pattern_key(uint64_t seed, int rank, int iter) {
  uint64_t h = rank_hash(seed, rank, "mgpu_rank_pattern_key",
                         "a rank whose outputs a verifier checks knows its own patterns only: "
                         "another rank's bytes (and the expected values made of them) belong "
                         "behind mgpu_verifies()");
  h = mix64(h ^ 0x7270617474000000ULL); /* "rpatt" */
  return mix64(h ^ (uint64_t)(uint32_t)iter);
}

uint64_t mgpu_pattern_key(uint64_t seed, int iter) {
  uint64_t h = g.split && !g.verifier ? g.pattern_seed : mgpu__oneway64("mgpu pattern", seed, 0);
  return mix64(h ^ (uint64_t)(uint32_t)iter);
}

/* ---- the verifier (docs/protocol.md §4) -------------------------------------------------- */

int mgpu_computes(const mgpu_ctx *ctx) {
  (void)ctx;
  return !g.verifier;
}

int mgpu_verifies(const mgpu_ctx *ctx) {
  (void)ctx;
  return g.verifier || !g.split;
}

/* The verifier found the rank's outputs out of the driver's order: the program's fault. */
#define VFAIL(...) fail_fmt("verifier", __LINE__, "mgpu_hand_over", __VA_ARGS__)

int mgpu_hand_over(mgpu_ctx *ctx, const char *tag, void *buf, size_t bytes) {
  char got[160];
  size_t n = 0;
  int k;
  (void)ctx;
  if (!g.ctx) HFAIL("mgpu_hand_over", "mgpu_init was not called");
  if (!tag || !*tag || strlen(tag) > 120 || strpbrk(tag, " \n"))
    mgpu_fail("driver", "mgpu_hand_over", __FILE__, __LINE__, 0,
              "a hand-over tag is 1 to 120 characters without spaces");
  if (!g.split) return 1; /* one process does both: the buffer already holds the output */
  g.handed++;
  if (!g.verifier) {
    if (mgpu__chan_submit(tag, buf, bytes) != 0)
      HFAIL("mgpu_hand_over", "the checker closed the outputs connection (at %s)", tag);
    return 0;
  }
  k = mgpu__chan_next(got, sizeof got, &n);
  if (k == -1) VFAIL("the rank's outputs ended before it handed over \"%s\"", tag);
  if (k != 0 || strcmp(got, tag) != 0 || n != bytes)
    VFAIL("the rank handed over \"%.120s\" (%zu bytes) where its driver hands over "
                  "\"%s\" (%zu bytes): something other than the driver wrote to the outputs "
                  "connection",
                  k == 0 ? got : "(malformed)", n, tag, bytes);
  if (mgpu__chan_read(buf, bytes) != 0)
    VFAIL("the rank's outputs ended inside \"%s\"", tag);
  return 1;
}

float mgpu_exact_value_k(uint64_t key, long long i) {
  uint64_t h = mix64(key ^ (uint64_t)i);
  uint32_t hi = (uint32_t)(h >> 32);
  return (float)((int)(((uint64_t)hi * 129u) >> 32) - 64);
}

float mgpu_fine_value_k(uint64_t key, long long i) {
  uint64_t h = mix64(key ^ (uint64_t)i);
  uint32_t hi = (uint32_t)(h >> 32);
  return (float)((int)(((uint64_t)hi * 129u) >> 32) - 64) + (float)(unsigned)(h & 63u) * 0.015625f;
}

uint8_t mgpu_pattern_byte_k(uint64_t key, long long i) {
  uint64_t w = mix64(key ^ (uint64_t)(i >> 3));
  return (uint8_t)(w >> (8 * (i & 7)));
}

void mgpu_pattern_fill_host(void *out, size_t n, uint64_t key, long long first) {
  uint8_t *o = (uint8_t *)out;
  size_t j = 0;
  while (j < n) {
    const long long i = first + (long long)j;
    const uint64_t w = mix64(key ^ (uint64_t)(i >> 3));
    int b;
    for (b = (int)(i & 7); b < 8 && j < n; b++, j++) o[j] = (uint8_t)(w >> (8 * b));
  }
}

float mgpu_exact_value(uint64_t seed, int rank, int iter, long long i) {
  return mgpu_exact_value_k(mgpu_exact_key(seed, rank, iter), i);
}

float mgpu_fine_value(uint64_t seed, int rank, int iter, long long i) {
  return mgpu_fine_value_k(mgpu_exact_key(seed, rank, iter), i);
}

uint8_t mgpu_pattern_byte(uint64_t seed, int iter, long long i) {
  return mgpu_pattern_byte_k(mgpu_pattern_key(seed, iter), i);
}
