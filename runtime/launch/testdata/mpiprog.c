/* mpiprog: a real MPI program that misbehaves on request, for the mpirun launcher tests.
 * Usage: mpiprog MODE [TOKEN | VAR...]
 * Modes (every rank calls MPI_Init first):
 *   ok          barrier, finalize, exit 0
 *   deadlock    ranks (2i, 2i+1) both MPI_Send 64 MiB to each other before receiving: no
 *               eager buffer holds that much, so every pair waits forever (the course's
 *               send/send bug); an odd last rank waits in MPI_Barrier
 *   forkdeadlock  as deadlock, and each rank first forks a child that sleeps forever in the
 *               rank's process group (a helper the rank started: only the supervisor's kill of
 *               that group reaches it, since the child has nothing to do with MPI)
 *   stuck1      rank 1 ignores SIGTERM and blocks in MPI_Recv; the others wait in a barrier
 *   exit1       rank 1 leaves with _exit(3) without MPI_Finalize; the others wait in a barrier
 *   abort1      rank 1 calls MPI_Abort(MPI_COMM_WORLD, 5)
 *   env         prints VAR=value for each VAR (or VAR=<unset>), then as ok */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int rank, world;
  if (argc < 2) return 2;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  printf("rank %d of %d pid %d mode %s\n", rank, world, (int)getpid(), argv[1]);
  fflush(stdout);
  if (strcmp(argv[1], "forkdeadlock") == 0) {
    pid_t c = fork();
    if (c == 0) {
      for (;;) pause();
    }
    printf("rank %d child %d\n", rank, (int)c);
    fflush(stdout);
  }
  if (strcmp(argv[1], "deadlock") == 0 || strcmp(argv[1], "forkdeadlock") == 0) {
    const int n = 64 << 20, partner = rank ^ 1;
    char *out = calloc(n, 1), *in = calloc(n, 1);
    if (partner < world) {
      MPI_Send(out, n, MPI_CHAR, partner, 0, MPI_COMM_WORLD);
      MPI_Recv(in, n, MPI_CHAR, partner, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else if (strcmp(argv[1], "stuck1") == 0 && rank == 1) {
    int x;
    signal(SIGTERM, SIG_IGN);
    printf("rank 1 ignores SIGTERM\n");
    fflush(stdout);
    MPI_Recv(&x, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (strcmp(argv[1], "exit1") == 0 && rank == 1) {
    usleep(200 * 1000);
    _exit(3);
  } else if (strcmp(argv[1], "abort1") == 0 && rank == 1) {
    usleep(200 * 1000);
    MPI_Abort(MPI_COMM_WORLD, 5);
  } else if (strcmp(argv[1], "env") == 0) {
    for (int i = 2; i < argc; i++) {
      const char *v = getenv(argv[i]);
      printf("%s=%s\n", argv[i], v ? v : "<unset>");
    }
    fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
