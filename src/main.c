/* ntkd command line: run a kernel job, or inspect, export and verify a store. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zstd.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "job/config.h"
#include "job/jobfiles.h"
#include "base/cpuinit.h"
#include "inspect.h"
#include "run.h"
#include "base/signals.h"
#include "solve/solve.h"
#include "base/status.h"

static const char usage[] =
    "usage:\n"
    "  ntkd JOB.conf [--overwrite]          compute the kernel matrix, or resume it (ntkd run JOB.conf:\n"
    "                                       the same)\n"
    "  mpirun -np N ntkd JOB.conf           the same on N ranks (rank 0 coordinates)\n"
    "  ntkd info [--records] STORE          shape, kernels, precision, progress, compression;\n"
    "                                       --records: where each tile's record is, and any damage\n"
    "  ntkd export STORE OUT [--kernel nngp|ntk] [--rows A:B] [--cols C:D] [--format npy|raw]\n"
    "                                       the symmetric matrix, or the block of rows A..B-1 and\n"
    "                                       columns C..D-1 (:B and A: as in Python), as .npy or raw\n"
    "  ntkd verify STORE                    check every tile; exit 0 only if all are intact\n"
    "  ntkd solve STORE JOB.conf            kernel regression with the job's labels and [solve]\n"
    "                                       ridges: test accuracy, MSE, predictions (.npy)\n"
    "  ntkd check JOB.conf [--fragment]     check the job file (sections, keys, values, arch)\n"
    "                                       without reading data; --fragment: a piece of one\n"
    "  ntkd --help | --version\n"
    "\n"
    "--overwrite replaces a store that belongs to another job (different data or model).\n"
    "Exit codes: 0 success, 1 internal/MPI failure, 2 bad usage, config, input or store of\n"
    "another job, 3 I/O failure (finished tiles are kept), 4 damaged store, 5 interrupted\n"
    "by a signal (rerun to resume), 6 store incomplete, 7 store in use by another job,\n"
    "8 a kernel value beyond the precision, 9 a rank stopped answering (rerun to resume).\n"
    "Job file reference: docs/JOB-FILE.md; commands and exit codes: docs/CLI.md\n";

static int bad_usage(const char *msg) {
  fprintf(stderr, "ntkd: %s\n\n%s", msg, usage);
  return NTK_EXIT_USAGE;
}

/* An argument that begins with '-' and is no option of `what`: named,
 * with the way to give a file whose name begins so. */
static int unknown_option(const char *arg, const char *what) {
  char msg[640];
  snprintf(msg, sizeof msg, "unknown option '%.200s' for %s (a file whose name begins with '-': ./%.200s, or -- "
           "before it)", arg, what, arg);
  return bad_usage(msg);
}

/* A command's arguments from argv[first]: `--` ends the options (what
 * follows is a file, whatever its name); a flag of `flags` (NULL-ended)
 * sets its bit in *set; any other argument beginning with '-' is refused,
 * named; exactly `n` others go to pos[], else `what_usage`. 1, or 0 with the
 * exit code in *code. */
static int command_args(int argc, char **argv, int first, const char *cmd, const char *const *flags, unsigned *set,
                        const char **pos, int n, const char *what_usage, int *code) {
  int np = 0;
  for (int i = first, options = 1; i < argc; i++) {
    int f = -1;
    for (int k = 0; options && flags && flags[k] && f < 0; k++)
      if (!strcmp(argv[i], flags[k])) f = k;
    if (options && !strcmp(argv[i], "--")) options = 0;
    else if (f >= 0) *set |= 1u << f;
    else if (options && argv[i][0] == '-') return *code = unknown_option(argv[i], cmd), 0;
    else if (np < n) pos[np++] = argv[i];
    else return *code = bad_usage(what_usage), 0;
  }
  if (np != n) return *code = bad_usage(what_usage), 0;
  return 1;
}

static int run(int argc, char **argv, int first) {
  const char *conf = NULL;
  unsigned overwrite = 0;
  int code;
  if (!command_args(argc, argv, first, "a job run", (const char *const[]){"--overwrite", NULL}, &overwrite, &conf, 1,
                    "a job run takes one job file", &code))
    return code;
  ntk_comm_t *world = NULL;
  ntk_status st = ntk_comm_init(&argc, &argv, &world);
  if (st) {
    fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
    return ntk_status_exit_code(st);
  }
  code = ntk_run_job(world, conf, (int)overwrite);
  ntk_comm_finalize();
  return code;
}

/* `ntkd check JOB.conf [--fragment]`: the job file read and checked as a run
 * reads it, the arch string included, but no data; one line on success. */
static int check(int argc, char **argv) {
  const char *conf = NULL;
  unsigned fragment = 0;
  int code;
  if (!command_args(argc, argv, 2, "check", (const char *const[]){"--fragment", NULL}, &fragment, &conf, 1,
                    "check takes one job file", &code))
    return code;
  char *text = NULL;
  struct ntk_job *job = calloc(1, sizeof *job);
  ntk_status st = job ? ntk_read_text_file(conf, &text, NULL) : ntk_error(NTK_ENOMEM, "out of memory");
  if (!st) st = fragment ? ntk_job_parse_fragment(text, conf, job) : ntk_job_parse_string(text, conf, job);
  /* What the run refuses before any tile, from the job file alone: an
   * output that would replace an input or one of ntkd's own files, a name
   * without room for NAME.index, a prediction file that would replace the
   * store or an input, or another ridge's (two ridges that %g prints
   * alike). (check said yes to [output] path = the data file.) */
  if (!st && !fragment) st = ntk_job_check_files(job);
  if (!st && !fragment && job->solve.enabled) st = ntk_solve_check_outputs(job->out_path, job, (uint32_t)job->kernels);
  free(text);
  if (st) {
    fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
  } else if (fragment) {
    printf("%s: a valid fragment (sections, keys and values; not what a whole job needs)\n", conf);
  } else {
    char line[1024];
    ntk_job_summary(job, line, sizeof line);
    printf("%s: %s\n", conf, line);
  }
  ntk_job_free(job);
  free(job);
  return ntk_status_exit_code(st);
}

/* Before any library's constructor runs (OpenBLAS and the CUDA runtime
 * start threads in theirs, Open MPI's libraries are large): the stop
 * signals are blocked, so one that arrives during start-up waits, pending,
 * until main() has decided what it does. Only the kernel's exec and the
 * dynamic loader's relocations (a fraction of a millisecond) come before. */
static void std_fds_open(void);

static void block_stop_signals(int argc, char **argv, char **envp) {
  (void)argc, (void)argv, (void)envp;
  ntk_signals_block();
  std_fds_open(); /* before any constructor opens a file too */
}
__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **, char **) =
    block_stop_signals;

/* Commands that write nothing: a stop signal's default action (death) is
 * right for them. A job, `solve` and `export` poll the stop flag instead:
 * they stop with exit 5, removing what they had half written. */
static int is_store_command(const char *cmd) {
  static const char *const names[] = {"info", "verify", "check", "--help", "-h", "help", "--version"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcmp(cmd, names[i])) return 1;
  return 0;
}

/* Standard input, output and error open, on /dev/null where closed
 * (ntkd 2>&-): else the next files opened take their numbers, and the log
 * lines went into the store or its lock file (a helper's hunt: a store's
 * header copy overwritten by progress lines, exit 4). */
static void std_fds_open(void) {
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      int got = open("/dev/null", fd ? O_WRONLY : O_RDONLY);
      if (got >= 0 && got != fd) { /* a lower number was free: cannot be, but never keep it elsewhere */
        dup2(got, fd);
        close(got);
      }
      if (got < 0) _exit(NTK_EXIT_IO); /* nowhere to say so; never run with a store on fd 2 */
    }
}

static int command(int argc, char **argv);

/* A stack limit (ulimit -s) of a few dozen KiB: ntkd keeps path buffers of
 * 4 KiB on its stack, and its threads get stacks of the same size; at
 * 32 KiB it crashed (SIGSEGV) before it read anything. Refused below a
 * floor that every command has room under, before any of it runs. */
static int stack_too_small(void) {
  enum { floor_kib = 256 };
  struct rlimit rl;
  if (getrlimit(RLIMIT_STACK, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= floor_kib * 1024) return 0;
  fprintf(stderr, "ntkd: error: the stack limit (ulimit -s) is %llu KiB; ntkd needs at least %d KiB (its threads get "
          "stacks of that size too): raise it (8192 KiB is the usual default)\n",
          (unsigned long long)rl.rlim_cur / 1024, floor_kib);
  return 1;
}

/* A command's result printed on standard output (solve's table, info,
 * export's and check's lines) that could not be written is a failure
 * (exit 3), not exit 0 over a lost result: solve >/dev/full exited 0. A
 * job's result is its store; its stdout lines are log. */
int main(int argc, char **argv) {
  if (stack_too_small()) return NTK_EXIT_FAILURE;
  int code = command(argc, argv);
  int prints = argc >= 2 && (is_store_command(argv[1]) || !strcmp(argv[1], "solve") || !strcmp(argv[1], "export"));
  errno = 0;
  if (fflush(stdout) != 0 || ferror(stdout)) {
    int e = errno;
    if (prints) {
      fprintf(stderr, "ntkd: error: writing the results to standard output failed: %s\n",
              e ? strerror(e) : "an earlier write failed");
      if (!code) code = NTK_EXIT_IO;
    }
  }
  return code;
}

static int command(int argc, char **argv) {
  /* First of all: for a job, a stop signal during start-up (MPI_Init
   * takes a while) sets the flag that the job polls instead of killing it
   * unreported; so do solve and export. The other commands keep the
   * default action. */
  if (argc >= 2 && is_store_command(argv[1])) ntk_signals_plain();
  else ntk_signals_install();
  ntk_cpu_fix_openblas(argv);
  if (argc < 2) return bad_usage("no command");
  const char *cmd = argv[1];
  /* The commands that call OpenBLAS: refused under an address-space limit
   * it would spin in for ever (base/cpuinit.h), before anything starts. */
  int blas = !is_store_command(cmd) && strcmp(cmd, "export");
  if (blas && ntk_cpu_check_address_space(ntk_cpu_blas_threads())) {
    fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
    fflush(NULL);
    _exit(NTK_EXIT_FAILURE); /* not exit: OpenBLAS's destructor would take a buffer of its pool, and spin */
  }
  if (blas) ntk_cpu_reserve_blas();
  const char *pos[2] = {NULL, NULL};
  int code;
  int help = !strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help");
  /* nothing after them: `ntkd --version job.conf` printed and exited 0, the job not run */
  if ((help || !strcmp(cmd, "--version")) &&
      !command_args(argc, argv, 2, cmd, NULL, NULL, pos, 0, help ? "help takes no argument" :
                    "--version takes no argument", &code))
    return code;
  if (help) {
    fputs(usage, stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    char be[1024];
    ntk_backend_describe(be, sizeof be);
    printf("ntkd %s\nbackends: %s\nOpenBLAS kernels: %s\nzstd: %s\n", NTKD_VERSION, be, ntk_cpu_blas_core(),
           ZSTD_versionString());
    return 0;
  }
  if (!strcmp(cmd, "info")) {
    unsigned records = 0;
    if (!command_args(argc, argv, 2, "info", (const char *const[]){"--records", NULL}, &records, pos, 1,
                      "info takes one store path (and --records)", &code))
      return code;
    return ntk_cmd_info(pos[0], (int)records);
  }
  if (!strcmp(cmd, "verify")) {
    if (!command_args(argc, argv, 2, "verify", NULL, NULL, pos, 1, "verify takes one store path", &code)) return code;
    ntk_comm_t *world = NULL;
    ntk_status st = ntk_comm_init(&argc, &argv, &world); /* under mpirun each rank checks a share of the tiles */
    if (st) {
      fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
      return ntk_status_exit_code(st);
    }
    code = ntk_cmd_verify(world, pos[0]);
    ntk_comm_finalize();
    return code;
  }
  if (!strcmp(cmd, "solve")) {
    if (!command_args(argc, argv, 2, "solve", NULL, NULL, pos, 2, "solve takes a store path and a job file", &code))
      return code;
    ntk_comm_t *world = NULL;
    ntk_status st = ntk_comm_init(&argc, &argv, &world); /* under mpirun the methods use every rank */
    if (st) {
      fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
      return ntk_status_exit_code(st);
    }
    code = ntk_cmd_solve(world, pos[0], pos[1]);
    ntk_comm_finalize();
    return code;
  }
  if (!strcmp(cmd, "check")) return check(argc, argv);
  if (!strcmp(cmd, "export")) {
    /* One process's work: under mpirun every rank wrote the whole matrix
     * to the same file, racing (N times the work, a stop signal seen by
     * one rank after another's rename). Rank 0 exports; the others leave. */
    if (ntk_comm_launch_rank() > 0) return 0;
    const char *kernel = NULL, *rows = NULL, *cols = NULL, *format = NULL;
    static const char *const opts[] = {"--kernel", "--rows", "--cols", "--format"};
    const char **vals[] = {&kernel, &rows, &cols, &format};
    int np = 0, options = 1;
    for (int i = 2; i < argc; i++) {
      int o = -1;
      size_t ol = 0;
      if (options && !strcmp(argv[i], "--")) {
        options = 0;
        continue;
      }
      for (int k = 0; k < 4 && o < 0 && options; k++) {
        ol = strlen(opts[k]);
        if (!strncmp(argv[i], opts[k], ol) && (argv[i][ol] == '\0' || argv[i][ol] == '=')) o = k;
      }
      if (o >= 0 && *vals[o]) { /* as a key in a job file: once, never the last of two silently */
        fprintf(stderr, "ntkd: error: export: %s given twice ('%s', then '%s')\n", opts[o], *vals[o],
                argv[i][ol] == '=' ? argv[i] + ol + 1 : i + 1 < argc ? argv[i + 1] : "");
        return NTK_EXIT_USAGE;
      }
      if (o >= 0 && argv[i][ol] == '=') *vals[o] = argv[i] + ol + 1;
      else if (o >= 0 && i + 1 < argc) *vals[o] = argv[++i];
      else if (o >= 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "export: %.200s without its value", argv[i]);
        return bad_usage(msg);
      } else if (options && argv[i][0] == '-') {
        return unknown_option(argv[i], "export");
      }
      else if (np < 2) pos[np++] = argv[i];
      else return bad_usage("export takes STORE and OUT");
    }
    if (np != 2) return bad_usage("export takes STORE and OUT");
    if (format && strcmp(format, "npy") && strcmp(format, "raw")) {
      fprintf(stderr, "ntkd: error: --format must be npy or raw, not '%s'\n", format);
      return NTK_EXIT_USAGE;
    }
    return ntk_cmd_export(pos[0], pos[1], kernel, rows, cols, format && !strcmp(format, "raw"));
  }
  if (!strcmp(cmd, "run")) return run(argc, argv, 2);
  if (cmd[0] == '-' && strcmp(cmd, "--overwrite") && strcmp(cmd, "--")) return unknown_option(cmd, "ntkd");
  return run(argc, argv, 1);
}
