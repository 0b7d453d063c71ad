# Sourced by the scripts: Open MPI settings for running as root, more ranks
# than cores, and containers (see docs/CLI.md, Environment). Existing values win.
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export CK_FORK=${CK_FORK:-no}
# Not set here: OMPI_MCA_odls_base_sigkill_timeout, the grace Open MPI's
# mpirun gives the ranks after SIGINT/SIGTERM before SIGKILL. 10 s lets ntkd
# store the tiles in flight (scripts/slurm/kernel.sbatch sets it), but mpirun
# then also waits up to 20 s before returning from any job that ends with an
# error (a typo in a job file, a store in use): docs/CLI.md, "Stopping a job".
