#!/usr/bin/env bash
# Several builds of memlens on the same inputs, alternating run by run in the same minutes:
# medians of wall, cpu (user + sys) and peak RSS per build and input, from /usr/bin/time.
#
#   bench/alternate.sh ROUNDS NAME=BINARY[,VERB]... -- FILE...
#   e.g. bench/alternate.sh 7 own=/tmp/memlens-own mimalloc=/tmp/memlens-mi system=/tmp/memlens-sys \
#          -- bench/data/synth_training_1GB.pickle bench/data/rep_1GB.pickle
#        bench/alternate.sh 5 stats=/tmp/memlens diag=/tmp/memlens,diagnose -- FILE
#
# Each round runs every build once per input (`memlens VERB --json FILE`, VERB `stats` unless
# given, output discarded), the order of the builds rotating each round.
set -euo pipefail
rounds=$1; shift
names=(); bins=(); verbs=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  names+=("${1%%=*}"); b="${1#*=}"
  case "$b" in *,*) bins+=("${b%%,*}"); verbs+=("${b#*,}") ;; *) bins+=("$b"); verbs+=(stats) ;; esac
  shift
done
shift
files=("$@")
t=$(mktemp); log=$(mktemp)
n=${#bins[@]}
for r in $(seq 0 $((rounds - 1))); do
  for f in "${files[@]}"; do
    for k in $(seq 0 $((n - 1))); do
      i=$(( (k + r) % n ))
      /usr/bin/time -o "$t" -f "%e %U %S %M" "${bins[$i]}" "${verbs[$i]}" --json "$f" >/dev/null 2>&1
      read -r w u s m <"$t"
      echo "${names[$i]} $(basename "$f") $w $(awk -v u="$u" -v s="$s" 'BEGIN{printf "%.2f", u+s}') $m" >>"$log"
    done
  done
done
printf "%-10s %-34s %8s %8s %9s\n" build input wall_s cpu_s rss_MB
median() { sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for f in "${files[@]}"; do
  b=$(basename "$f")
  for name in "${names[@]}"; do
    rows=$(awk -v n="$name" -v b="$b" '$1==n && $2==b' "$log")
    w=$(echo "$rows" | awk '{print $3}' | median)
    c=$(echo "$rows" | awk '{print $4}' | median)
    m=$(echo "$rows" | awk '{print $5}' | median)
    printf "%-10s %-34s %8.2f %8.2f %9.0f\n" "$name" "$b" "$w" "$c" "$(awk -v m="$m" 'BEGIN{print m/1024}')"
  done
done
echo "($rounds rounds; spread of cpu_s per build and input, min-max:)"
for f in "${files[@]}"; do
  b=$(basename "$f")
  for name in "${names[@]}"; do
    awk -v n="$name" -v b="$b" '$1==n && $2==b {if (min=="" || $4<min) min=$4; if ($4>max) max=$4} END{printf "  %s %s %.2f-%.2f\n", n, b, min, max}' "$log"
  done
done
rm -f "$t" "$log"
