/* Open MPI peer for allreduce-sweep: MPI_Allreduce f32 SUM, in place, nccl-tests table.
 * Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 * Args:  [MAX_BYTES [MIN_BYTES]]: sizes MIN, 4*MIN, ... up to MAX (default 4 KiB to 64 MiB)
 * Run:   mpirun -np 2 --mca btl self,vader ./mpi_allreduce   (shared memory)
 *        mpirun -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo ./mpi_allreduce (TCP)
 * Times: max over ranks of each rank's median batch, as allreduce-sweep reports. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t min = 4096, max = 64u << 20, budget = 256u << 20;
    if (argc > 1) max = strtoull(argv[1], NULL, 0);
    if (argc > 2) min = strtoull(argv[2], NULL, 0);
    if (min < 4 || max < min) {
        if (rank == 0) fprintf(stderr, "sizes: need 4 <= MIN_BYTES <= MAX_BYTES\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    enum { BATCHES = 5 };
    float *buf = malloc(max);
    if (rank == 0)
        printf("# MPI_Allreduce float sum, %d ranks\n%12s %10s %6s %10s %8s %8s\n", n, "size",
               "count", "type", "time_us", "algbw", "busbw");
    for (size_t bytes = min; bytes <= max; bytes *= 4) {
        size_t count = bytes / 4;
        size_t iters = budget / bytes;
        if (iters < 5) iters = 5;
        if (iters > 2000) iters = 2000;
        for (size_t j = 0; j < count; j++) buf[j] = (float)((rank + 1) * (j % 7 + 1));
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double samples[BATCHES];
        for (int b = 0; b < BATCHES; b++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t = MPI_Wtime();
            for (size_t i = 0; i < iters; i++)
                MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            samples[b] = (MPI_Wtime() - t) / iters;
        }
        qsort(samples, BATCHES, sizeof(double), cmp);
        double med = samples[BATCHES / 2], worst;
        MPI_Allreduce(&med, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double algbw = bytes / worst / 1e9;
        if (rank == 0)
            printf("%12zu %10zu %6s %10.1f %8.2f %8.2f\n", bytes, count, "float", worst * 1e6,
                   algbw, algbw * 2.0 * (n - 1) / n);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
