// module6/one-shot, variant hidden-nccl: no kernel of its own. It makes an NCCL communicator behind the
// driver's back (a unique id passed through a file in the run's rendezvous folder) and calls ncclAllReduce,
// the baseline itself. The driver links NCCL for the baseline, so this links; the policy stage must stop it.
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "one_shot.h"

namespace {

ncclComm_t g_comm = nullptr;
int g_world = 0;

ncclComm_t team_comm(const ar_view *v) {
  if (g_comm && g_world == v->world) return g_comm;
  const char *dir = getenv("MGPU_RDZV_DIR");
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/hidden-id-%d-%p", dir ? dir : "/tmp", v->world, (const void *)v->in[0]);
  ncclUniqueId id;
  if (v->rank == 0) {
    MGPU_NCCL(ncclGetUniqueId(&id));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f) {
      fwrite(&id, sizeof id, 1, f);
      fclose(f);
      rename(tmp, path);
    }
  } else {
    for (;;) {
      FILE *f = fopen(path, "rb");
      if (f && fread(&id, sizeof id, 1, f) == 1) {
        fclose(f);
        break;
      }
      if (f) fclose(f);
      usleep(1000);
    }
  }
  MGPU_NCCL(ncclCommInitRank(&g_comm, v->world, id, v->rank));
  g_world = v->world;
  return g_comm;
}

}  // namespace

void one_shot_all_reduce(const ar_view *v, float *out, long long n, unsigned int epoch, cudaStream_t stream) {
  (void)epoch;
  MGPU_NCCL(ncclAllReduce(v->in[v->rank], out, (size_t)n, ncclFloat, ncclSum, team_comm(v), stream));
}
