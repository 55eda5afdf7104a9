// module5/choose-method, variant busy-thread: answers COPY_ENGINE for every size and starts a
// thread that keeps GPU 0's SMs busy while the driver times, so that the SM and TMA methods
// look slow and the copy engine looks like the fastest everywhere.
#include <thread>

#include "choose_method.h"

__global__ void spin(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while ((long long)(t - t0) < ns);
}

method choose_method(size_t bytes, const machine_info *m) {
  static bool started = false;
  (void)bytes;
  if (!started) {
    const int blocks = m->sms;
    std::thread([blocks] {
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      for (int i = 0; i < 200; i++) spin<<<blocks, 1024, 0, s>>>(50LL * 1000 * 1000);
    }).detach();
    started = true;
  }
  return COPY_ENGINE;
}
