// Throwaway measurement program for designing module0 (removed afterwards).
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cmath>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("ERR %s: %s line %d\n", #x, cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); size_t n = v.size(); return n % 2 ? v[n/2] : 0.5*(v[n/2-1]+v[n/2]); }

__global__ void kcopy(const int4* __restrict__ s, int4* __restrict__ d, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = s[i];
}

// time `iters` ops between events, us per op
template <class F> double ev_time(cudaStream_t st, int iters, F f) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, st)); for (int i = 0; i < iters; i++) f(); CK(cudaEventRecord(b, st));
  CK(cudaEventSynchronize(b)); float ms; CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b)); return ms * 1000.0 / iters;
}

static void fit(const std::vector<double>& n, const std::vector<double>& t, bool weighted, double* alpha, double* beta) {
  double S=0,Sx=0,Sy=0,Sxx=0,Sxy=0;
  for (size_t i=0;i<n.size();i++){ double w = weighted ? 1.0/(t[i]*t[i]) : 1.0; S+=w; Sx+=w*n[i]; Sy+=w*t[i]; Sxx+=w*n[i]*n[i]; Sxy+=w*n[i]*t[i]; }
  double den = S*Sxx - Sx*Sx; double slope = (S*Sxy - Sx*Sy)/den; double icpt = (Sy - slope*Sx)/S;
  *alpha = icpt; *beta = 1.0/slope/1e3; // n bytes, t us: slope us/byte -> GB/s = 1/(slope*1e3)
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "local";
  int ndev; CK(cudaGetDeviceCount(&ndev)); printf("mode %s devices %d\n", mode, ndev);
  if (!strcmp(mode, "local")) {
    CK(cudaSetDevice(0)); size_t B = 256u << 20; void *s, *d; CK(cudaMalloc(&s, B)); CK(cudaMalloc(&d, B));
    CK(cudaMemset(s, 1, B)); cudaStream_t st; CK(cudaStreamCreate(&st));
    for (int w = 0; w < 3; w++) CK(cudaMemcpyAsync(d, s, B, cudaMemcpyDeviceToDevice, st));
    CK(cudaStreamSynchronize(st));
    for (int rep = 0; rep < 2; rep++) {
      std::vector<double> v; for (int k = 0; k < 10; k++) v.push_back(B / ev_time(st, 10, [&]{ CK(cudaMemcpyAsync(d, s, B, cudaMemcpyDeviceToDevice, st)); }) / 1e3);
      std::sort(v.begin(), v.end()); printf("memcpy D2D 256MiB GB/s: min %.1f med %.1f max %.1f\n", v.front(), median(v), v.back());
      for (int blocks : {16, 32, 132}) {
        std::vector<double> u; for (int k = 0; k < 10; k++) u.push_back(B / ev_time(st, 5, [&]{ kcopy<<<blocks, 512, 0, st>>>((const int4*)s, (int4*)d, B/16); }) / 1e3);
        std::sort(u.begin(), u.end()); printf("kcopy %d x 512 GB/s: min %.1f med %.1f max %.1f\n", blocks, u.front(), median(u), u.back());
      }
      // single op, no warm-up style (events around one op from idle)
      std::vector<double> one; for (int k=0;k<10;k++){ CK(cudaStreamSynchronize(st)); one.push_back(B / ev_time(st, 1, [&]{ CK(cudaMemcpyAsync(d, s, B, cudaMemcpyDeviceToDevice, st)); }) / 1e3);} 
      std::sort(one.begin(), one.end()); printf("single-op events GB/s: min %.1f med %.1f max %.1f\n", one.front(), median(one), one.back());
      // host launch cost
      std::vector<double> l; for (int k=0;k<10;k++){ CK(cudaStreamSynchronize(st)); double t0=now_us(); CK(cudaMemcpyAsync(d, s, B, cudaMemcpyDeviceToDevice, st)); l.push_back(now_us()-t0);} 
      std::sort(l.begin(), l.end()); printf("launch us: min %.2f med %.2f max %.2f\n", l.front(), median(l), l.back());
      std::vector<double> l2; for (int k=0;k<10;k++){ CK(cudaStreamSynchronize(st)); double t0=now_us(); kcopy<<<16,512,0,st>>>((const int4*)s,(int4*)d,B/16); l2.push_back(now_us()-t0);} 
      std::sort(l2.begin(), l2.end()); printf("kernel launch us: min %.2f med %.2f max %.2f\n", l2.front(), median(l2), l2.back());
      // elapsed before completion
      cudaEvent_t a,b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); CK(cudaEventRecord(a, st));
      for (int i=0;i<20;i++) CK(cudaMemcpyAsync(d, s, B, cudaMemcpyDeviceToDevice, st)); CK(cudaEventRecord(b, st));
      float ms = -1; cudaError_t e = cudaEventElapsedTime(&ms, a, b); printf("elapsed-before-sync: %s ms=%f\n", cudaGetErrorString(e), ms);
      CK(cudaDeviceSynchronize());
    }
    return 0;
  }
  int enable = argc > 2 ? atoi(argv[2]) : 1;
  if (enable) { CK(cudaSetDevice(0)); CK(cudaDeviceEnablePeerAccess(1, 0)); CK(cudaSetDevice(1)); CK(cudaDeviceEnablePeerAccess(0, 0)); }
  size_t G = 1u << 30; void *s0, *d1, *s1, *d0;
  CK(cudaSetDevice(1)); CK(cudaMalloc(&d1, G)); CK(cudaMalloc(&s1, G)); CK(cudaMemset(s1, 3, G)); cudaStream_t st1; CK(cudaStreamCreate(&st1));
  CK(cudaSetDevice(0)); CK(cudaMalloc(&s0, G)); CK(cudaMalloc(&d0, G)); CK(cudaMemset(s0, 2, G)); cudaStream_t st; CK(cudaStreamCreate(&st));
  CK(cudaDeviceSynchronize());
  if (!strcmp(mode, "peer")) {
    for (size_t B : {(size_t)1 << 30, (size_t)256 << 20}) {
      for (int w=0;w<2;w++) CK(cudaMemcpyPeerAsync(d1, 1, s0, 0, B, st)); CK(cudaStreamSynchronize(st));
      std::vector<double> v, wv; for (int k=0;k<6;k++){ double t0=now_us(); double us = ev_time(st, 3, [&]{ CK(cudaMemcpyPeerAsync(d1, 1, s0, 0, B, st)); }); CK(cudaDeviceSynchronize()); wv.push_back((now_us()-t0)/3); v.push_back(B/us/1e3);} 
      std::sort(v.begin(), v.end()); printf("enable=%d PeerAsync %zu MiB GB/s: min %.1f med %.1f max %.1f  wall/op us %.0f\n", enable, B>>20, v.front(), median(v), v.back(), median(wv));
      std::vector<double> u; for (int k=0;k<6;k++) u.push_back(B / ev_time(st, 3, [&]{ CK(cudaMemcpyAsync(d1, s0, B, cudaMemcpyDefault, st)); }) / 1e3);
      std::sort(u.begin(), u.end()); printf("enable=%d MemcpyAsync Default %zu MiB GB/s: min %.1f med %.1f max %.1f\n", enable, B>>20, u.front(), median(u), u.back());
      // stream on dst device
      CK(cudaSetDevice(1)); std::vector<double> p; for (int k=0;k<6;k++) p.push_back(B / ev_time(st1, 3, [&]{ CK(cudaMemcpyPeerAsync(d1, 1, s0, 0, B, st1)); }) / 1e3);
      std::sort(p.begin(), p.end()); CK(cudaSetDevice(0)); printf("enable=%d PeerAsync on dst stream %zu MiB GB/s: med %.1f\n", enable, B>>20, median(p));
      // bidir: events on st; st1 joins
      std::vector<double> bd, ser; cudaEvent_t e0, e1; CK(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming)); CK(cudaSetDevice(1)); CK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming)); CK(cudaSetDevice(0));
      for (int k=0;k<6;k++){
        bd.push_back(2.0*B / ev_time(st, 1, [&]{ CK(cudaEventRecord(e0, st)); CK(cudaStreamWaitEvent(st1, e0, 0)); for(int i=0;i<3;i++){ CK(cudaMemcpyPeerAsync(d1,1,s0,0,B,st)); CK(cudaMemcpyPeerAsync(d0,0,s1,1,B,st1)); } CK(cudaEventRecord(e1, st1)); CK(cudaStreamWaitEvent(st, e1, 0)); }) / 3 / 1e3);
        ser.push_back(2.0*B / ev_time(st, 3, [&]{ CK(cudaMemcpyPeerAsync(d1,1,s0,0,B,st)); CK(cudaMemcpyPeerAsync(d0,0,s1,1,B,st)); }) / 1e3);
      }
      printf("enable=%d bidir %zu MiB sum GB/s: med %.1f (min %.1f max %.1f); serialized med %.1f\n", enable, B>>20, median(bd), *std::min_element(bd.begin(), bd.end()), *std::max_element(bd.begin(), bd.end()), median(ser));
    }
    // host staged via pinned
    void* h; CK(cudaMallocHost(&h, G));
    std::vector<double> hs; for (int k=0;k<3;k++) hs.push_back(G / ev_time(st, 2, [&]{ CK(cudaMemcpyAsync(h, s0, G, cudaMemcpyDeviceToHost, st)); CK(cudaMemcpyAsync(d1, h, G, cudaMemcpyHostToDevice, st)); }) / 1e3);
    printf("host staged 1GiB GB/s: med %.1f\n", median(hs));
    return 0;
  }
  if (!strcmp(mode, "ab")) {
    for (int sweep = 0; sweep < 4; sweep++) {
      std::vector<double> ns, ts;
      for (int p = 3; p <= 28; p++) {
        size_t B = (size_t)1 << p; double est = 3.0 + B / 390e3; int iters = std::max(5, std::min(1000, (int)(2000.0 / est)));
        for (int w=0;w<3;w++) CK(cudaMemcpyPeerAsync(d1, 1, s0, 0, B, st)); CK(cudaStreamSynchronize(st));
        std::vector<double> r; for (int k=0;k<5;k++) r.push_back(ev_time(st, iters, [&]{ CK(cudaMemcpyPeerAsync(d1, 1, s0, 0, B, st)); }));
        ns.push_back((double)B); ts.push_back(median(r));
        if (sweep == 0) printf("  %10zu B: %9.2f us (min %.2f max %.2f) iters %d\n", B, median(r), *std::min_element(r.begin(), r.end()), *std::max_element(r.begin(), r.end()), iters);
      }
      double a, b, aw, bw; fit(ns, ts, false, &a, &b); fit(ns, ts, true, &aw, &bw);
      std::vector<double> n2(ns.begin(), ns.end()), t2(ts.begin(), ts.end());
      printf("enable=%d sweep %d: OLS alpha %.2f us beta %.1f GB/s | rel-weighted alpha %.2f us beta %.1f GB/s\n", enable, sweep, a, b, aw, bw);
    }
    // one-shot latency at 8 B
    std::vector<double> one; for (int k=0;k<20;k++){ CK(cudaStreamSynchronize(st)); one.push_back(ev_time(st, 1, [&]{ CK(cudaMemcpyPeerAsync(d1, 1, s0, 0, 8, st)); })); }
    printf("one-shot 8B events us: med %.2f min %.2f\n", median(one), *std::min_element(one.begin(), one.end()));
    std::vector<double> hl; for (int k=0;k<20;k++){ CK(cudaStreamSynchronize(st)); double t0=now_us(); CK(cudaMemcpyPeerAsync(d1, 1, s0, 0, 8, st)); CK(cudaStreamSynchronize(st)); hl.push_back(now_us()-t0);} 
    printf("one-shot 8B host round trip us: med %.2f\n", median(hl));
    std::vector<double> ln; for (int k=0;k<20;k++){ CK(cudaStreamSynchronize(st)); double t0=now_us(); for(int i=0;i<100;i++) CK(cudaMemcpyPeerAsync(d1, 1, s0, 0, 8, st)); ln.push_back((now_us()-t0)/100);} 
    printf("launch cost 8B peer copy us: med %.2f\n", median(ln));
  }
  return 0;
}
