//go:build ignore

// The line above keeps the Go tool from compiling this C file into package csrc, which only
// embeds the harness sources (embed.go).

/*
 * mgpu_chan.c — the authenticated records channel (docs/protocol.md §4).
 *
 * When the checker runs a program it sets MGPU_RECORDS=unix:<path>. Before main — in a
 * constructor of the lowest user priority, ahead of anything the learner's objects may run
 * (the policy stage refuses learner objects with earlier or prioritized start-up code) — this
 * file connects to that socket, says which rank and process it is, and receives a per-run key
 * and the run's seed. Neither is in the environment, argv or the file system. Every record
 * then travels as "<hmac> <json>\n" where hmac = HMAC-SHA256(key, "<seq> <json>") and seq
 * counts the records from 1, so the checker can tell the harness's records from bytes anyone
 * else writes, and sees a dropped, replayed or reordered record.
 *
 * The same constructor takes a SHA-256 of the executable's code; mgpu_finish compares it
 * again, so code patched at run time is reported.
 *
 * What this does not defend (docs/protocol.md §4 lists it): native code that reads the key out
 * of this process's memory. The channel makes forging a record a matter of memory forensics
 * rather than of reading the protocol document.
 */
#define _GNU_SOURCE

#include "mgpu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------------------------ */

typedef struct sha256 {
  uint32_t h[8];
  uint64_t len; /* bytes hashed */
  unsigned char buf[64];
  size_t nbuf;
} sha256;

static const uint32_t k_sha[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(sha256 *s, const unsigned char *p) {
  uint32_t w[64], a, b, c, d, e, f, g, h;
  int i;
  for (i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           (uint32_t)p[4 * i + 3];
  for (i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
  e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (i = 0; i < 64; i++) {
    uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + k_sha[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d;
  s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

static void sha_init(sha256 *s) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, iv, sizeof iv);
  s->len = 0;
  s->nbuf = 0;
}

static void sha_update(sha256 *s, const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  s->len += n;
  if (s->nbuf) {
    size_t take = 64 - s->nbuf < n ? 64 - s->nbuf : n;
    memcpy(s->buf + s->nbuf, p, take);
    s->nbuf += take, p += take, n -= take;
    if (s->nbuf < 64) return;
    sha_block(s, s->buf);
    s->nbuf = 0;
  }
  for (; n >= 64; p += 64, n -= 64) sha_block(s, p);
  memcpy(s->buf, p, n);
  s->nbuf = n;
}

static void sha_final(sha256 *s, unsigned char out[32]) {
  uint64_t bits = s->len * 8;
  unsigned char pad = 0x80, zero = 0, lenb[8];
  int i;
  sha_update(s, &pad, 1);
  while (s->nbuf != 56) sha_update(s, &zero, 1);
  for (i = 0; i < 8; i++) lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha_update(s, lenb, 8);
  for (i = 0; i < 8; i++) {
    out[4 * i] = (unsigned char)(s->h[i] >> 24);
    out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
    out[4 * i + 3] = (unsigned char)s->h[i];
  }
}

/* A one-way 64-bit function of (tag, a, b): the first 8 bytes, little-endian, of
 * SHA-256(tag || le64(a) || le64(b)). The keys a split rank is given are made with it from the
 * seed (mgpu_core.c, rank_hash), so that holding one rank's key, or the run's pattern key,
 * says nothing of the seed or of another rank's key (docs/harness.md, "Exact data"). */
uint64_t mgpu__oneway64(const char *tag, uint64_t a, uint64_t b) {
  unsigned char buf[16], out[32];
  uint64_t v = 0;
  sha256 s;
  int i;
  for (i = 0; i < 8; i++) {
    buf[i] = (unsigned char)(a >> (8 * i));
    buf[8 + i] = (unsigned char)(b >> (8 * i));
  }
  sha_init(&s);
  sha_update(&s, tag, strlen(tag));
  sha_update(&s, buf, sizeof buf);
  sha_final(&s, out);
  for (i = 7; i >= 0; i--) v = v << 8 | out[i];
  return v;
}

/* HMAC-SHA256 (RFC 2104) with a 32-byte key over two pieces of message. */
static void hmac_sha256(const unsigned char key[32], const void *m1, size_t n1, const void *m2,
                        size_t n2, unsigned char out[32]) {
  unsigned char pad[64], inner[32];
  sha256 s;
  int i;
  memset(pad, 0x36, sizeof pad);
  for (i = 0; i < 32; i++) pad[i] ^= key[i];
  sha_init(&s);
  sha_update(&s, pad, 64);
  sha_update(&s, m1, n1);
  sha_update(&s, m2, n2);
  sha_final(&s, inner);
  memset(pad, 0x5c, sizeof pad);
  for (i = 0; i < 32; i++) pad[i] ^= key[i];
  sha_init(&s);
  sha_update(&s, pad, 64);
  sha_update(&s, inner, 32);
  sha_final(&s, out);
}

/* ---- state ----------------------------------------------------------------------------------- */

static struct {
  int fd;                 /* connected socket; -1 when there is no channel */
  unsigned char key[32];  /* per-run key from the checker */
  uint64_t seed;          /* the run's seed from the checker */
  unsigned long long seq; /* records sent */
  int have_code_hash;
  unsigned char code_hash[32]; /* SHA-256 of the executable's read-only mappings at start */
  char refused[256];           /* why the checker refused us, when it did */
  /* The verifier (docs/protocol.md §4, "The verifier"): */
  int verifier;           /* 1: this process is a rank's verifier (MGPU_ROLE=verifier) */
  int split;              /* 1: this rank's outputs are checked by a verifier process */
  int sub_fd;             /* split rank: the connection its outputs travel on; -1 otherwise */
  uint64_t rank_seed;     /* split rank: the key of its own inputs (no run seed) */
  uint64_t pattern_seed;  /* split rank: the key of the run's byte patterns */
} c = {-1, {0}, 0, 0, 0, {0}, "", 0, 0, -1, 0, 0};

static const char k_hex[] = "0123456789abcdef";

static int hexval(int ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  return -1;
}

/* ---- code hash --------------------------------------------------------------------------------- */

/* SHA-256 over the executable file's code mappings (executable, not writable), in address
 * order. 0 when /proc/self/maps cannot be read. */
static int code_hash(unsigned char out[32]) {
  char exe[4096], line[4608];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  FILE *f;
  sha256 s;
  int any = 0;
  if (n <= 0) return 0;
  exe[n] = 0;
  f = fopen("/proc/self/maps", "re");
  if (!f) return 0;
  sha_init(&s);
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perms[8], path[4096];
    unsigned long long off;
    unsigned dmaj, dmin;
    unsigned long inode;
    path[0] = 0;
    if (sscanf(line, "%lx-%lx %7s %llx %x:%x %lu %4095s", &lo, &hi, perms, &off, &dmaj, &dmin,
               &inode, path) < 7)
      continue;
    if (strcmp(path, exe) != 0 || perms[1] == 'w' || perms[2] != 'x') continue;
    sha_update(&s, &lo, sizeof lo);
    sha_update(&s, (const void *)lo, hi - lo);
    any = 1;
  }
  fclose(f);
  if (!any) return 0;
  sha_final(&s, out);
  return 1;
}

/* ---- the handshake --------------------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Reads one line (without its newline) of at most cap-1 bytes. */
static int read_line(int fd, char *buf, size_t cap) {
  size_t n = 0;
  while (n + 1 < cap) {
    char ch;
    ssize_t k = read(fd, &ch, 1);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    if (ch == '\n') {
      buf[n] = 0;
      return 0;
    }
    buf[n++] = ch;
  }
  return -1;
}

static const char *rank_from_env(void) {
  static const char *const names[] = {"MGPU_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", NULL};
  int i;
  for (i = 0; names[i]; i++) {
    const char *v = getenv(names[i]);
    if (v && *v) return v;
  }
  return "0";
}

static void die_early(const char *why) {
  fprintf(stderr, "[rank %s] mgpu harness: records channel: %s\n", rank_from_env(), why);
  fflush(stderr);
  _exit(1);
}

/* A connection to the checker's socket; ends the process when there is none. */
static int dial(const struct sockaddr_un *sa) {
  char why[512];
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die_early("cannot create a socket");
  while (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0) {
    if (errno == EINTR) continue;
    snprintf(why, sizeof why, "cannot connect to %s: %s", sa->sun_path, strerror(errno));
    die_early(why);
  }
  return fd;
}

__attribute__((constructor(101))) static void mgpu__chan_start(void) {
  const char *addr = getenv("MGPU_RECORDS");
  struct sockaddr_un sa;
  char hello[256], reply[256], why[512];
  const char *rank, *p;
  int fd, i;

  c.have_code_hash = code_hash(c.code_hash);
  if (!addr || !*addr) return; /* standalone: records go to a file (mgpu_core.c) */
  if (strncmp(addr, "unix:", 5) != 0) die_early("MGPU_RECORDS must be unix:<socket path>");
  addr += 5;
  if (strlen(addr) >= sizeof sa.sun_path) die_early("MGPU_RECORDS: socket path too long");
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  strcpy(sa.sun_path, addr);
  fd = dial(&sa);
  rank = rank_from_env();
  {
    const char *role = getenv("MGPU_ROLE");
    c.verifier = role && strcmp(role, "verifier") == 0;
  }
  /* A verifier is about to receive the seed, from which every rank's inputs and expected
   * values follow: not dumpable, so no process of the user's without CAP_SYS_PTRACE (a rank
   * where the kernel lets a user's processes trace each other) can read or write its memory
   * through ptrace or /proc/<pid>/mem (docs/protocol.md §4). */
  if (c.verifier && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    die_early("prctl(PR_SET_DUMPABLE) failed in the verifier");
  snprintf(hello, sizeof hello, "%s %s %ld c/1\n", c.verifier ? "verify" : "hello", rank,
           (long)getpid());
  if (write_all(fd, hello, strlen(hello)) != 0 || read_line(fd, reply, sizeof reply) != 0)
    die_early("the checker closed the channel during the handshake");
  if (strncmp(reply, "ok ", 3) != 0) {
    snprintf(why, sizeof why, "the checker refused this process: %s", reply);
    die_early(why);
  }
  p = reply + 3;
  for (i = 0; i < 32; i++) {
    int hi = hexval(p[2 * i]), lo = hi < 0 ? -1 : hexval(p[2 * i + 1]);
    if (lo < 0) die_early("malformed key in the checker's reply");
    c.key[i] = (unsigned char)(hi << 4 | lo);
  }
  p += 64;
  if (*p != ' ') die_early("malformed reply (no seed)");
  if (strncmp(p, " split ", 7) == 0) {
    /* A split rank: the keys of its own inputs and of the run's patterns, never the seed. */
    char *end;
    errno = 0;
    c.rank_seed = strtoull(p + 7, &end, 10);
    if (errno || end == p + 7 || *end != ' ') die_early("malformed rank seed in the reply");
    p = end;
    c.pattern_seed = strtoull(p + 1, &end, 10);
    if (errno || end == p + 1 || *end) die_early("malformed pattern seed in the reply");
    c.split = 1;
  } else {
    char *end;
    errno = 0;
    c.seed = strtoull(p + 1, &end, 10);
    if (errno || end == p + 1 || *end) die_early("malformed seed in the checker's reply");
  }
  if (c.split && !c.verifier) {
    /* The second connection, on which the outputs go to the verifier (mgpu_hand_over). */
    int sfd = dial(&sa);
    snprintf(hello, sizeof hello, "submit %s %ld\n", rank, (long)getpid());
    if (write_all(sfd, hello, strlen(hello)) != 0 || read_line(sfd, reply, sizeof reply) != 0 ||
        strcmp(reply, "ok") != 0)
      die_early("the checker refused the outputs connection");
    c.sub_fd = sfd;
  }
  memset(reply, 0, sizeof reply);
  c.fd = fd;
}

/* ---- for mgpu_core.c ----------------------------------------------------------------------- */

int mgpu__chan_active(void) { return c.fd >= 0; }

uint64_t mgpu__chan_seed(void) { return c.seed; }

int mgpu__chan_send(const char *json, size_t n) {
  char seqs[32], line_head[66];
  unsigned char mac[32];
  int k, i;
  if (c.fd < 0) return -1;
  c.seq++;
  k = snprintf(seqs, sizeof seqs, "%llu ", c.seq);
  hmac_sha256(c.key, seqs, (size_t)k, json, n, mac);
  for (i = 0; i < 32; i++) {
    line_head[2 * i] = k_hex[mac[i] >> 4];
    line_head[2 * i + 1] = k_hex[mac[i] & 15];
  }
  line_head[64] = ' ';
  line_head[65] = 0;
  if (write_all(c.fd, line_head, 65) != 0 || write_all(c.fd, json, n) != 0 ||
      write_all(c.fd, "\n", 1) != 0)
    return -1;
  return 0;
}

int mgpu__chan_verifier(void) { return c.verifier; }

int mgpu__chan_split(uint64_t *rank_seed, uint64_t *pattern_seed) {
  if (rank_seed) *rank_seed = c.rank_seed;
  if (pattern_seed) *pattern_seed = c.pattern_seed;
  return c.split;
}

int mgpu__chan_submit(const char *tag, const void *data, size_t n) {
  char head[160];
  int k;
  if (c.sub_fd < 0) return -1;
  k = snprintf(head, sizeof head, "%s %zu\n", tag, n);
  if (k <= 0 || (size_t)k >= sizeof head) return -1;
  if (write_all(c.sub_fd, head, (size_t)k) != 0) return -1;
  if (n > 0 && write_all(c.sub_fd, (const char *)data, n) != 0) return -1;
  return 0;
}

/* The verifier's side: the next output's tag and size, then its bytes. */
int mgpu__chan_next(char *tag, size_t cap, size_t *n) {
  char line[160], *sp, *end;
  unsigned long long v;
  if (c.fd < 0 || !c.verifier) return -1;
  if (read_line(c.fd, line, sizeof line) != 0) return -1;
  sp = strrchr(line, ' ');
  if (!sp) return -2;
  *sp = 0;
  errno = 0;
  v = strtoull(sp + 1, &end, 10);
  if (errno || end == sp + 1 || *end) return -2;
  snprintf(tag, cap, "%s", line);
  *n = (size_t)v;
  return 0;
}

int mgpu__chan_read(void *buf, size_t n) {
  char *p = (char *)buf;
  while (n > 0) {
    ssize_t k = read(c.fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

void mgpu__chan_close(void) {
  if (c.sub_fd >= 0) {
    shutdown(c.sub_fd, SHUT_WR);
    close(c.sub_fd);
    c.sub_fd = -1;
  }
  if (c.fd >= 0) {
    shutdown(c.fd, SHUT_WR);
    close(c.fd);
  }
  c.fd = -1;
  memset(c.key, 0, sizeof c.key);
}

int mgpu__code_changed(void) {
  unsigned char now[32];
  if (!c.have_code_hash) return 0;
  if (!code_hash(now)) return 1; /* the maps vanished: something is very wrong */
  return memcmp(now, c.code_hash, sizeof now) != 0;
}
