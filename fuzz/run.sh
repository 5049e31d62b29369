#!/usr/bin/env bash
# Runs built fuzz targets for FUZZ_SECONDS each (default 60), one after another, under nice.
# Usage: fuzz/run.sh [Target ...]   (default: all three). Extra libFuzzer flags: FUZZ_FLAGS="...".
# Working corpora grow in fuzz/out/corpus/<target> (seeded from fuzz/corpus/<target>); crashes, timeouts
# and leaks land in fuzz/out/artifacts/<target>/; logs in fuzz/out/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${FUZZ_OUT:-$(pwd)/fuzz/out}
SECONDS_EACH=${FUZZ_SECONDS:-60}
# A crash would otherwise hang in Swift's backtracer instead of reaching libFuzzer's handler.
export SWIFT_BACKTRACE=enable=no
status=0
for t in ${*:-XMLPlistFuzzer BinaryPlistFuzzer ArchiveFuzzer}; do
    mkdir -p "$OUT/corpus/$t" "$OUT/artifacts/$t" "$OUT/logs"
    dict=()
    [[ $t == *PlistFuzzer ]] && dict=(-dict=fuzz/plist.dict)
    log="$OUT/logs/$t-$(date -u +%Y%m%dT%H%M%SZ).log"
    echo "fuzz: $t for ${SECONDS_EACH}s (log $log)" >&2
    if ! nice -n 19 "$OUT/bin/$t" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10 \
        -max_len=${FUZZ_MAX_LEN:-65536} -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$t/" \
        "${dict[@]}" ${FUZZ_FLAGS:-} "$OUT/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
        echo "fuzz: $t FAILED, see $log and $OUT/artifacts/$t/" >&2
        status=1
    fi
    grep -E '^#[0-9]+' "$log" | tail -1 >&2 || true
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" >&2 || true
done
exit $status
