// module5/choose-method, variant timer-busy: answers COPY_ENGINE for every size and arms a POSIX
// timer whose expiries run in a thread (SIGEV_THREAD): every 5 ms that thread queues 5 ms of
// spinning over every SM of GPU 0. No pthread_create, std::thread or thrd_create: the policy let
// it through, and while the driver times, the SM and TMA methods wait for SMs and the copy
// engine, which needs none, looks fastest at every size. The policy stage must refuse
// timer_create.
#include <signal.h>
#include <string.h>
#include <time.h>

#include "choose_method.h"

__global__ void spin(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while ((long long)(t - t0) < ns);
}

static int g_sms;

static void tick(union sigval) {  // a thread of the timer's: GPU 0
  spin<<<8 * g_sms, 256, 0, cudaStreamPerThread>>>(5LL * 1000 * 1000);
}

method choose_method(size_t bytes, const machine_info *m) {
  static bool armed = false;
  (void)bytes;
  if (!armed) {
    g_sms = m->sms;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD;
    sev.sigev_notify_function = tick;
    timer_t t;
    timer_create(CLOCK_MONOTONIC, &sev, &t);
    struct itimerspec every;
    memset(&every, 0, sizeof every);
    every.it_value.tv_nsec = 5 * 1000 * 1000;
    every.it_interval.tv_nsec = 5 * 1000 * 1000;
    timer_settime(t, 0, &every, NULL);
    armed = true;
  }
  return COPY_ENGINE;
}
