# The arguments of the scripts in scripts/ (sourced by them, before they
# read any): -h or --help prints the script's opening comment, its usage,
# and exits 0; a word beginning with '-' that the script does not take,
# or more arguments than it takes, is refused with exit 2, rather than
# taken for a build folder or a count, or ignored.
#   source "$(dirname "$0")/args.sh"
#   script_args MAX [--OPTION ...] -- "$@"      (MAX: a number, or any)
script_args() {
  local max=$1 opts=() a o n=0 known
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  for a in "$@"; do
    case $a in
      -h | --help)
        sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
        exit 0 ;;
      -[0-9]*) n=$((n + 1)) ;;
      -*)
        known=0
        for o in "${opts[@]}"; do [ "$a" = "$o" ] && known=1; done
        if [ "$known" = 0 ]; then
          echo "$(basename "$0"): unknown option '$a' (--help: its usage)" >&2
          exit 2
        fi ;;
      *) n=$((n + 1)) ;;
    esac
  done
  if [ "$max" != any ] && [ "$n" -gt "$max" ]; then
    echo "$(basename "$0"): takes at most $max argument(s), got $n (--help: its usage)" >&2
    exit 2
  fi
}
