# Sourced by the scripts: Open MPI settings for running as root, more ranks
# than cores, and containers (see docs/CLI.md, Environment). Existing values win.
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export CK_FORK=${CK_FORK:-no}
# Grace for a clean stop when mpirun itself gets SIGINT, SIGTERM or SIGHUP
# (Ctrl-C, kill, a batch system). Open MPI 4.1's mpirun does not forward
# these: it sends the ranks SIGCONT, waits this many seconds, sends SIGTERM
# (ntkd then stores the tiles in flight and syncs), waits as long again, or
# until a rank exits, and sends SIGKILL. Its default, 1 s, kills ranks that
# are still finishing a tile; 10 s covers a tile of a few seconds (see
# docs/RELIABILITY.md on tile sizes) and keeps the whole sequence (20 s)
# inside SLURM's default KillWait of 30 s. Raise it for longer tiles. It
# also delays the end of a job that ntkd ends with MPI_Abort (exit 1 or 9)
# by up to twice this. mpirun exits 1 after such a signal whatever the ranks
# do (SIGUSR1 gives ntkd's 5): docs/CLI.md, "Stopping a job".
export OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-10}
