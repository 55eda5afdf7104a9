//go:build ignore

// The line above keeps the Go tool from compiling this C file into package csrc, which only
// embeds the harness sources (embed.go).

/*
 * mgpu_fd.c — passing file descriptors between the ranks of a run (docs/protocol.md §5,
 * docs/harness.md §9): the harness's answer to "how does rank 1 get the fd that rank 0's
 * cuMemExportToShareableHandle returned?". A file descriptor means something only inside its
 * process; the kernel copies one into another process only when it travels as SCM_RIGHTS
 * ancillary data over a Unix socket. mgpu_share_fds does that, collectively, for every rank.
 *
 * Pure POSIX (Linux: abstract Unix sockets, SO_PEERCRED). Builds with cc -std=c11 and nvcc -x c.
 *
 * One exchange, number k under key K:
 *   1. every rank binds and listens on an abstract Unix socket named after the run's
 *      rendezvous directory, k and its rank (abstract names vanish with their process, so a
 *      crashed run leaves nothing behind, and they have no path-length problem);
 *   2. the ranks meet in a file gather (mgpu__gather) that carries each rank's pid and fd
 *      count: once it completes, every listener exists;
 *   3. every rank connects to every other rank's socket and sends one message: a header
 *      (magic, exchange number, its rank, n) with its n descriptors attached;
 *   4. every rank accepts world-1 connections. The kernel says which process connected
 *      (SO_PEERCRED); a connection from a process that is not the rank it claims to be, or a
 *      message for another exchange, is refused as a harness error. A rank that never sends
 *      is reported by number after MGPU_RDZV_TIMEOUT_S seconds, like a missing rank at a
 *      barrier.
 */
#define _GNU_SOURCE 1 /* SO_PEERCRED, struct ucred, MSG_CMSG_CLOEXEC, accept4 */

#include "mgpu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FD_MAGIC 0x6d676664u /* "mgfd" */

typedef struct fd_info {
  int64_t pid;
  int32_t n;
  int32_t pad;
} fd_info;

typedef struct fd_header {
  uint32_t magic;
  uint32_t seq;
  int32_t from;
  int32_t n;
} fd_header;

static unsigned long fd_seq; /* exchanges so far (collective: the same on every rank) */

static void fd_fail(int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  mgpu_fail("harness", "mgpu_share_fds", __FILE__, line, 0, msg);
}
#define FDFAIL(...) fd_fail(__LINE__, __VA_ARGS__)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double rdzv_timeout_s(void) {
  const char *v = getenv("MGPU_RDZV_TIMEOUT_S");
  char *end;
  long s;
  if (!v || !*v) return 60.0;
  s = strtol(v, &end, 10);
  if (end == v || *end || s < 1) return 60.0; /* mgpu_init has already refused a bad value */
  return (double)s;
}

/* FNV-1a: a short, stable name for the run's rendezvous directory. */
static uint64_t fnv64(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ULL;
  }
  return h;
}

/* The abstract socket address of rank r in exchange seq; returns the address length. */
static socklen_t fd_addr(struct sockaddr_un *a, const char *dir, unsigned long seq, int r) {
  int k;
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  /* sun_path[0] = 0 makes the name abstract: it lives in the kernel, not in the file system. */
  k = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "mgpu-fd-%016llx-%lu-%d",
               (unsigned long long)fnv64(dir), seq, r);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
}

static void close_all(int *fds, int n) {
  int i;
  for (i = 0; i < n; i++)
    if (fds[i] >= 0) {
      close(fds[i]);
      fds[i] = -1;
    }
}

/* Sends the header and n descriptors to rank `to`. */
static void send_to(const char *dir, unsigned long seq, int me, int to, const int *fds, int n,
                    double deadline) {
  struct sockaddr_un a;
  socklen_t alen = fd_addr(&a, dir, seq, to);
  fd_header h;
  struct msghdr m;
  struct iovec io;
  union {
    char buf[CMSG_SPACE(sizeof(int) * MGPU_MAX_FDS)];
    struct cmsghdr align;
  } c;
  int s;
  ssize_t k;
  for (;;) {
    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) FDFAIL("socket: %s", strerror(errno));
    if (connect(s, (struct sockaddr *)&a, alen) == 0) break;
    /* The gather has passed, so the listener exists; a full backlog or a slow start is retried. */
    if ((errno != ECONNREFUSED && errno != EAGAIN && errno != EINTR) || now_s() > deadline) {
      int e = errno;
      close(s);
      FDFAIL("exchange #%lu: cannot reach rank %d's socket: %s (crashed, or at a different "
             "call?)",
             seq, to, strerror(e));
    }
    close(s);
    {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
  }
  h.magic = FD_MAGIC;
  h.seq = (uint32_t)seq;
  h.from = me;
  h.n = n;
  memset(&m, 0, sizeof m);
  memset(&c, 0, sizeof c);
  io.iov_base = &h;
  io.iov_len = sizeof h;
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  if (n > 0) {
    struct cmsghdr *cm;
    m.msg_control = c.buf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
    cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
  }
  do {
    k = sendmsg(s, &m, MSG_NOSIGNAL);
  } while (k < 0 && errno == EINTR);
  if (k != (ssize_t)sizeof h) {
    int e = errno;
    close(s);
    FDFAIL("exchange #%lu: sending to rank %d failed: %s", seq, to, k < 0 ? strerror(e) : "short write");
  }
  close(s); /* descriptors in flight stay valid after the sender closes */
}

/* Reads one message from an accepted connection into the slots of its sender. */
static void recv_from(int s, unsigned long seq, const mgpu_ctx *ctx, const fd_info *info, int n,
                      int *peer_fds, int *got) {
  fd_header h;
  struct msghdr m;
  struct iovec io;
  union {
    char buf[CMSG_SPACE(sizeof(int) * MGPU_MAX_FDS)];
    struct cmsghdr align;
  } c;
  struct ucred cred;
  socklen_t clen = sizeof cred;
  int fds[MGPU_MAX_FDS], nfds = 0, i;
  ssize_t k;
  size_t have = 0;
  struct cmsghdr *cm;

  if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0)
    FDFAIL("exchange #%lu: SO_PEERCRED: %s", seq, strerror(errno));
  for (i = 0; i < MGPU_MAX_FDS; i++) fds[i] = -1;
  memset(&m, 0, sizeof m);
  memset(&c, 0, sizeof c);
  io.iov_base = &h;
  io.iov_len = sizeof h;
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = c.buf;
  m.msg_controllen = sizeof c.buf;
  do {
    k = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
  } while (k < 0 && errno == EINTR);
  if (k <= 0) FDFAIL("exchange #%lu: a connection from pid %ld sent nothing", seq, (long)cred.pid);
  for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      int cnt = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int)), j;
      for (j = 0; j < cnt; j++) {
        int fd;
        memcpy(&fd, CMSG_DATA(cm) + sizeof(int) * (size_t)j, sizeof fd);
        if (nfds < MGPU_MAX_FDS)
          fds[nfds++] = fd;
        else
          close(fd);
      }
    }
  }
  have = (size_t)k;
  while (have < sizeof h) { /* the rest of the header, if the first read was short */
    k = read(s, (char *)&h + have, sizeof h - have);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    have += (size_t)k;
  }
  if (have != sizeof h || (m.msg_flags & MSG_CTRUNC)) {
    close_all(fds, nfds);
    FDFAIL("exchange #%lu: a malformed message from pid %ld", seq, (long)cred.pid);
  }
  if (h.magic != FD_MAGIC || h.seq != (uint32_t)seq || h.from < 0 || h.from >= ctx->world ||
      h.from == ctx->rank) {
    close_all(fds, nfds);
    FDFAIL("exchange #%lu: pid %ld sent a message for another exchange (#%u from rank %d)", seq,
           (long)cred.pid, h.seq, h.from);
  }
  if ((int64_t)cred.pid != info[h.from].pid) {
    close_all(fds, nfds);
    FDFAIL("exchange #%lu: pid %ld connected as rank %d, whose pid is %lld: refused", seq,
           (long)cred.pid, h.from, (long long)info[h.from].pid);
  }
  if (got[h.from]) {
    close_all(fds, nfds);
    FDFAIL("exchange #%lu: rank %d sent twice", seq, h.from);
  }
  if (h.n != n || nfds != n) {
    close_all(fds, nfds);
    FDFAIL("exchange #%lu: rank %d sent %d descriptor(s) (header says %d), %d expected", seq,
           h.from, nfds, h.n, n);
  }
  for (i = 0; i < n; i++) peer_fds[(size_t)h.from * (size_t)n + (size_t)i] = fds[i];
  got[h.from] = 1;
}

void mgpu_share_fds(mgpu_ctx *ctx, const char *key, const int *my_fds, int n, int *peer_fds) {
  const char *dir;
  unsigned long seq;
  fd_info mine, *info;
  int *got, lis, r, missing, i;
  char tag[128];
  struct sockaddr_un a;
  socklen_t alen;
  double deadline;

  if (!ctx) ctx = mgpu__ctx();
  if (!ctx) FDFAIL("mgpu_init was not called");
  if (n < 0 || n > MGPU_MAX_FDS)
    FDFAIL("key \"%s\": %d descriptors; 0 to %d may be shared at once", key ? key : "", n,
           MGPU_MAX_FDS);
  if (n > 0 && (!my_fds || !peer_fds)) FDFAIL("key \"%s\": a NULL array", key ? key : "");
  for (i = 0; i < n; i++)
    if (fcntl(my_fds[i], F_GETFD) < 0)
      FDFAIL("key \"%s\": descriptor %d (entry %d) is not open in this process", key ? key : "",
             my_fds[i], i);
  /* This rank's own slots: copies the caller closes like the others. */
  for (i = 0; i < n; i++) {
    int d = fcntl(my_fds[i], F_DUPFD_CLOEXEC, 3);
    if (d < 0) FDFAIL("dup of descriptor %d: %s", my_fds[i], strerror(errno));
    peer_fds[(size_t)ctx->rank * (size_t)n + (size_t)i] = d;
  }
  if (ctx->world <= 1) return;
  for (r = 0; r < ctx->world; r++)
    if (r != ctx->rank)
      for (i = 0; i < n; i++) peer_fds[(size_t)r * (size_t)n + (size_t)i] = -1;

  dir = ctx->rdzv_dir;
  if (!dir || !*dir)
    FDFAIL("MGPU_RDZV_DIR is not set and %d ranks need a rendezvous", ctx->world);
  seq = ++fd_seq;
  deadline = now_s() + rdzv_timeout_s();

  lis = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lis < 0) FDFAIL("socket: %s", strerror(errno));
  alen = fd_addr(&a, dir, seq, ctx->rank);
  if (bind(lis, (struct sockaddr *)&a, alen) != 0)
    FDFAIL("exchange #%lu: bind of rank %d's socket: %s (another run with the same rendezvous "
           "directory?)",
           seq, ctx->rank, strerror(errno));
  if (listen(lis, ctx->world + 4) != 0) FDFAIL("listen: %s", strerror(errno));

  /* Everyone listens before anyone connects; the gather also carries pids and counts. */
  memset(&mine, 0, sizeof mine);
  mine.pid = (int64_t)getpid();
  mine.n = n;
  info = (fd_info *)calloc((size_t)ctx->world, sizeof *info);
  got = (int *)calloc((size_t)ctx->world, sizeof *got);
  if (!info || !got) FDFAIL("out of memory");
  snprintf(tag, sizeof tag, "fds-%s", key ? key : "");
  mgpu__gather(ctx, tag, &mine, sizeof mine, info);
  for (r = 0; r < ctx->world; r++)
    if (info[r].n != n)
      FDFAIL("key \"%s\": rank %d shares %d descriptor(s), this rank (%d) %d: every rank must "
             "share the same number",
             key ? key : "", r, (int)info[r].n, ctx->rank, n);

  for (r = 1; r < ctx->world; r++) { /* the next ranks first, so that no rank is everyone's first */
    int to = (ctx->rank + r) % ctx->world;
    send_to(dir, seq, ctx->rank, to, my_fds, n, deadline);
  }
  got[ctx->rank] = 1;
  for (;;) {
    struct pollfd p;
    double left;
    int s, pr;
    missing = 0;
    for (r = 0; r < ctx->world; r++) missing += !got[r];
    if (missing == 0) break;
    left = deadline - now_s();
    if (left <= 0) {
      char who[256];
      size_t off = 0;
      who[0] = 0;
      for (r = 0; r < ctx->world && off + 16 < sizeof who; r++)
        if (!got[r]) off += (size_t)snprintf(who + off, sizeof who - off, "%s%d", off ? ", " : "", r);
      FDFAIL("key \"%s\" (exchange #%lu): rank(s) %s did not send their descriptors within %.0f s "
             "(crashed, hung, or at a different call)",
             key ? key : "", seq, who, rdzv_timeout_s());
    }
    p.fd = lis;
    p.events = POLLIN;
    p.revents = 0;
    pr = poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
    if (pr < 0 && errno != EINTR) FDFAIL("poll: %s", strerror(errno));
    if (pr <= 0) continue;
    s = accept4(lis, NULL, NULL, SOCK_CLOEXEC);
    if (s < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      FDFAIL("accept: %s", strerror(errno));
    }
    recv_from(s, seq, ctx, info, n, peer_fds, got);
    close(s);
  }
  close(lis);
  free(info);
  free(got);
}
