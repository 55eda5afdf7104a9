#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include "sum.h"

/* A system call spelled as the instruction's bytes (x86-64): no symbol and no "syscall" word for
 * the policy stage to find. The policy's side-route rule is a speed bump; what this variant
 * proves is the line behind it. */
static long raw_sys3(long nr, long a, long b, long c) {
  long r;
  __asm__ volatile(".byte 0x0f, 0x05" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}

/* Does not add. Looks through every writable mapping of the process for the driver's expected
 * sums (found by their first four values) and copies them into out. Where the driver makes its
 * expected values in the same process before calling, this passes; where a verifier process
 * makes them, there is nothing to find and out stays as the driver left it. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  float key[4];
  char line[512];
  FILE *maps;
  int i;
  if (n < 4) return;
  for (i = 0; i < 4; i++) key[i] = a[i] + b[i];
  maps = fdopen((int)raw_sys3(2 /* open */, (long)"/proc/self/maps", O_RDONLY, 0), "r");
  if (!maps) return;
  while (fgets(line, sizeof line, maps)) {
    unsigned long lo, hi;
    char perms[8];
    const char *p;
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' || perms[1] != 'w')
      continue;
    if (strstr(line, "[vvar") || strstr(line, "[vsyscall")) continue;
    for (p = (const char *)lo; p + n * sizeof(float) <= (const char *)hi; p += sizeof(float)) {
      if ((const float *)p == out || (const float *)p == a || (const float *)p == b ||
          (const float *)p == key)
        continue;
      if (memcmp(p, key, sizeof key) == 0) {
        memcpy(out, p, (size_t)n * sizeof(float));
        fclose(maps);
        return;
      }
    }
  }
  fclose(maps);
}
