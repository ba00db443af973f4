#!/usr/bin/env bash
# Fuzz smoke run: builds the cargo-fuzz targets and runs each for FUZZ_SECONDS (default 60) from
# the committed seed corpus, failing on any crash, panic, leak of a file outside the jail,
# over-budget allocation or hang. Needs only stable Rust: RUSTC_BOOTSTRAP=1 unlocks the nightly
# flags cargo-fuzz passes (-Zsanitizer=address). Installs cargo-fuzz if it is missing.
#
#   bash fuzz/smoke.sh                 # all targets (restore, restore_tar, paths twice,
#                                      # kernel_frames, result_lines), 60 s each
#   FUZZ_SECONDS=600 bash fuzz/smoke.sh restore_tar
#
# The committed corpus is never modified: each run fuzzes a scratch copy. A crashing input is
# kept under fuzz/artifacts/<target>/ and printed as base64 so CI logs carry it.
set -uo pipefail
cd "$(dirname "$0")"

SECS=${FUZZ_SECONDS:-60}
# name  binary  dictionary  extra environment
ALL=(
  "restore      restore      restore.dict -"
  "restore_tar  restore_tar  restore.dict -"
  "paths        paths        paths.dict   -"
  "paths_fallback paths      paths.dict   KERN_SANDBOX_NO_OPENAT2=1"
  "kernel_frames kernel_frames kernel_frames.dict -"
  "result_lines result_lines result_lines.dict -"
)
WANT=("$@")

t0=$(date +%s)
export RUSTC_BOOTSTRAP=1
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  cargo install cargo-fuzz --locked || exit 1
fi
echo "fuzz: building targets"
cargo fuzz build --debug-assertions --release || exit 1
t1=$(date +%s)
echo "fuzz: build took $((t1 - t0)) s"

bindir=${CARGO_TARGET_DIR:-target}/$(rustc -vV | sed -n "s/^host: //p")/release
work=$(mktemp -d "${TMPDIR:-/tmp}/kern-fuzz-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT

passed=0
failed=0

# The oracle itself: an escape planted on purpose must be caught (else every run below is moot).
if KERN_FUZZ_SELFTEST=1 "$bindir/restore" corpus/restore/empty.tar.gz >"$work/selftest.log" 2>&1; then
  echo "fuzz: FAIL selftest: a deliberate escape went unnoticed by the fuzz oracle"
  failed=$((failed + 1))
else
  echo "fuzz: ok   selftest (a deliberate escape is caught)"
  passed=$((passed + 1))
fi

for row in "${ALL[@]}"; do
  read -r name bin dict extra <<<"$row"
  if [ ${#WANT[@]} -gt 0 ] && [[ ! " ${WANT[*]} " == *" $name "* ]]; then continue; fi
  mkdir -p "$work/corpus-$name" "artifacts/$name"
  cp corpus/"$bin"/* "$work/corpus-$name/"
  envs=()
  [ "$extra" != "-" ] && envs=("$extra")
  s=$(date +%s)
  env "${envs[@]}" "$bindir/$bin" "$work/corpus-$name" \
    -max_total_time="$SECS" -timeout=10 -malloc_limit_mb=64 -rss_limit_mb=2048 \
    -dict="dict/$dict" -artifact_prefix="artifacts/$name/" -print_final_stats=1 \
    >"$work/$name.log" 2>&1
  rc=$?
  execs=$(awk '/^stat::number_of_executed_units/ {print $2}' "$work/$name.log")
  rss=$(awk '/^stat::peak_rss_mb/ {print $2}' "$work/$name.log")
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$work/$name.log" | tail -1)
  if [ $rc -eq 0 ]; then
    echo "fuzz: ok   $name ($(( $(date +%s) - s )) s, ${execs:-?} execs, $cov, peak RSS ${rss:-?} MB)"
    passed=$((passed + 1))
  else
    echo "fuzz: FAIL $name (exit $rc)"
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' -A3 "$work/$name.log" | head -40
    for f in $(grep -oE 'Test unit written to \S+' "$work/$name.log" | awk '{print $5}'); do
      echo "fuzz: crashing input $f (base64):"
      base64 -w0 "$f" | head -c 20000
      echo
    done
    failed=$((failed + 1))
  fi
done

echo "fuzz: build $((t1 - t0)) s, total $(( $(date +%s) - t0 )) s"
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
