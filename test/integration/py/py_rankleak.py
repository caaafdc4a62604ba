# One process per rank (srun -n 2): rank 1 keeps 64 KiB more every 20 ms,
# the others allocate and free the same.
import os, time
rank = int(os.environ.get('SLURM_PROCID', '0'))
kept = []
for i in range(60):
    b = bytearray(64 << 10)
    if rank == 1:
        kept.append(b)
    time.sleep(0.02)
print('rank %d done' % rank)
