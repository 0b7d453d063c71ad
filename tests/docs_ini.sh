#!/usr/bin/env bash
# Every ```ini block of README.md and docs/*.md goes through `ntkd check`, so
# the job files the documentation shows cannot drift from the parser.
#
# Conventions for ```ini blocks in the documentation:
#   ```ini            a complete job file: `ntkd check` must accept it.
#   ```ini fragment   a piece of a job file (say a [solve] section shown
#                     alone): `ntkd check --fragment` must accept it, which
#                     checks the syntax and every section, key and value,
#                     but not the keys and sections a whole job needs.
#   ```arch           architecture strings, one per line (# comments and
#                     blank lines skipped): each must pass `ntkd check` as
#                     the [model] arch of a minimal job.
#   A block whose introducing line (the last line of text before it) names
#   a shipped job file as `configs/NAME.conf` is that file's content, byte
#   for byte (the file must exist).
# Every configs/*.conf must pass `ntkd check` as well. No data is read.
#   tests/docs_ini.sh path/to/ntkd
set -euo pipefail
NTKD=${1:?usage: docs_ini.sh path/to/ntkd}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-docs-ini-XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0

fail() {
  echo "FAIL $*"
  failed=$((failed + 1))
}

# The checker itself must be able to say no (and where).
printf '[data]\npath = x.npy\n[model]\narch = Dense\n[compute]\ntiel = 5   # a typo\n[output]\npath = o\n' \
  > "$work/typo.conf"
rc=0
out=$("$NTKD" check "$work/typo.conf" 2>&1) || rc=$?
if [ "$rc" != 2 ] || [[ "$out" != *"typo.conf:6: [compute] tiel: unknown key"* ]]; then
  fail "ntkd check accepted a job with an unknown key, or did not name it (exit $rc): $out"
fi

# ... and so must it for an architecture.
printf '[data]\npath = x.npy\n[model]\narch = Dense Gelu2 Dense\n[output]\npath = o\n' > "$work/arch.conf"
rc=0
out=$("$NTKD" check "$work/arch.conf" 2>&1) || rc=$?
if [ "$rc" != 2 ] || [[ "$out" != *"unknown layer 'Gelu2'"* ]]; then
  fail "ntkd check accepted an unknown layer, or did not name it (exit $rc): $out"
fi

# Split the Markdown files into blocks: $work/blocks/FILE-LLINE.conf, and one
# line per block in $work/list: markdown file, fence line, kind, block file,
# introducing line (tab-separated).
mkdir -p "$work/blocks"
: > "$work/list"
for md in "$root"/README.md "$root"/docs/*.md; do
  rel=${md#"$root"/}
  awk -v rel="$rel" -v dir="$work/blocks" '
    function flat(s) { gsub(/\//, "_", s); return s }
    /^[ \t]*```/ {
      if (!inside) {
        inside = 1; ini = 0
        indent = $0; sub(/```.*/, "", indent)
        info = $0; sub(/^[ \t]*```[ \t]*/, "", info); sub(/[ \t]+$/, "", info)
        if (info == "ini" || info == "ini fragment" || info == "arch") {
          ini = 1
          out = dir "/" flat(rel) "-L" FNR ".conf"
          printf "" > out
          printf "%s\t%d\t%s\t%s\t%s\n", rel, FNR, info == "ini" ? "job" : info == "arch" ? "arch" : "fragment", out, intro
        } else if (info ~ /^ini/) {
          printf "%s\t%d\tbad-info\t-\t%s\n", rel, FNR, info
        }
        next
      }
      if ($0 ~ /^[ \t]*```[ \t]*$/) {
        inside = 0
        if (ini) close(out)
        next
      }
    }
    inside && ini {
      line = $0
      if (substr(line, 1, length(indent)) == indent) line = substr(line, length(indent) + 1)
      print line > out
      next
    }
    !inside && $0 ~ /[^ \t]/ { intro = $0 }
    END { if (inside) printf "%s\t%d\tunclosed\t-\t-\n", rel, FNR }
  ' "$md" >> "$work/list"
done

blocks=0
archs=0
while IFS=$'\t' read -r md line kind file intro; do
  where="$md:$line"
  case $kind in
    bad-info) fail "$where: \`\`\`$intro: use \`\`\`ini (a whole job) or \`\`\`ini fragment"; continue ;;
    unclosed) fail "$where: a code block is not closed"; continue ;;
  esac
  blocks=$((blocks + 1))
  if [ "$kind" = arch ]; then
    n=0
    while IFS= read -r a; do
      n=$((n + 1))
      [[ "$a" =~ ^[[:space:]]*(#|$) ]] && continue
      printf '[data]\npath = x.npy\n[model]\narch = %s\n[output]\npath = o\n' "$a" > "$work/arch.conf"
      rc=0
      out=$("$NTKD" check "$work/arch.conf" 2>&1) || rc=$?
      if [ "$rc" != 0 ]; then fail "$md:$((line + n)): the architecture '$a' is refused (exit $rc): $out"
      else archs=$((archs + 1)); fi
    done < "$file"
    echo "ok   $where (arch block)"
    continue
  fi
  opt=()
  [ "$kind" = fragment ] && opt=(--fragment)
  rc=0
  out=$("$NTKD" check "${opt[@]}" "$file" 2>&1) || rc=$?
  if [ "$rc" != 0 ]; then
    fail "$where: the \`\`\`ini block (line N of it is $md line $line+N) is refused (exit $rc): $out"
    continue
  fi
  # A block introduced as a shipped file must be that file.
  shipped=$(grep -o '`configs/[A-Za-z0-9._-]*\.conf`' <<< "$intro" | tr -d '`' | sort -u || true)
  for conf in $shipped; do
    if [ ! -f "$root/$conf" ]; then
      fail "$where: the block is introduced as $conf, which does not exist"
    elif ! cmp -s "$file" "$root/$conf"; then
      fail "$where: the block is introduced as $conf but differs from it:"
      diff "$file" "$root/$conf" | sed 's/^/    /' || true
    else
      kind="$kind, = $conf"
    fi
  done
  echo "ok   $where ($kind): ${out#"$file": }"
done < "$work/list"
[ "$blocks" -gt 0 ] || fail "no \`\`\`ini block found in README.md and docs/*.md"

# The shipped job files.
for conf in "$root"/configs/*.conf; do
  rc=0
  out=$("$NTKD" check "$conf" 2>&1) || rc=$?
  if [ "$rc" != 0 ]; then fail "${conf#"$root"/} is refused (exit $rc): $out"
  else echo "ok   ${conf#"$root"/}"; fi
done

if [ "$failed" != 0 ]; then
  echo "docs_ini: $failed failure(s) ($blocks \`\`\`ini blocks)"
  exit 1
fi
echo "docs_ini: $blocks \`\`\`ini and \`\`\`arch blocks ($archs architectures) and every configs/*.conf pass ntkd check"
