// module6/nccl-device, variant host-api: hands the work to NCCL's host API. The result is right
// (every rank's input is at a->in), but it is the baseline, not the device API: the policy stage
// refuses ncclAllReduce in the learner's code.
#include "nccl_dev.h"

extern "C" void allreduce_device(const nd_args *a, cudaStream_t stream) {
  MGPU_NCCL(ncclAllReduce(a->in, a->out, a->n, ncclFloat, ncclSum, a->comm, stream));
}
