#!/bin/bash
# sbatch docs/snippets/slurm_job.sh ./train [args...]
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --time=01:00:00
export JACCL_TIMEOUT=120        # bootstrap deadline, also each PMIx fence's
srun --mpi=pmix "$@"            # pmix://, chosen by itself
