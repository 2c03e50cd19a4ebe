#!/usr/bin/env bash
# purerl's benchmarks on a lent GPU machine, prepared here and run there:
#   bash benchmarks/gpu.sh fetch [CHECKOUT]   # here, with PyPI: wheels and PureJaxRL lean
#   bash benchmarks/gpu.sh run                # there; SIZES=tiny, STAGES, OUT and PACK as
#                                             # benchmarks/README.md's "On a GPU" says
set -euo pipefail
cd "$(dirname "$0")/.."

PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux1_x86_64 --platform any)
ALL_STAGES="plans profile peers rejax brax throughput memory"

# wheels GROUP: the pins of gpu_wheels.txt's group (purerl, source, peer)
wheels() { sed -n "s/^$1: *//p" benchmarks/gpu_wheels.txt | tr ' ' '\n'; }

fetch() {
  local checkout=${1:-../purejaxrl}
  for target in .whl .peer-whl .peer; do
    grep -qx "/$target/" .git/info/exclude 2>/dev/null || echo "/$target/" >> .git/info/exclude
  done
  [ -f "$checkout/purejaxrl/ppo.py" ] || {
    echo "gpu.sh: no PureJaxRL at $checkout: git clone https://github.com/luchris429/purejaxrl" >&2
    exit 1; }
  local pip=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12
             --implementation cp "${PLATFORMS[@]}")
  rm -rf .whl .peer-whl .peer
  "${pip[@]}" -d .whl -r <(wheels purerl)
  python3 -m pip wheel -q --no-deps -w .whl -r <(wheels source)  # published as source only
  "${pip[@]}" -d .peer-whl -r <(wheels peer)
  mkdir -p .peer/purejaxrl
  cp "$checkout"/purejaxrl/{ppo.py,wrappers.py} .peer/purejaxrl/
  sed -i 's/"DEBUG": True/"DEBUG": False/' .peer/purejaxrl/ppo.py
  sed -i -e 's/^from brax import envs$/envs = None/' \
         -e 's/^from brax\.envs\.wrappers\.training import .*/EpisodeWrapper = AutoResetWrapper = object/' \
         -e 's/^import navix as nx$/nx = None/' .peer/purejaxrl/wrappers.py
  if grep -qE '^(from brax|import navix)' .peer/purejaxrl/wrappers.py; then
    echo "gpu.sh: wrappers.py's brax/navix imports changed; update the lean edit" >&2
    exit 1
  fi
  du -sh .whl .peer-whl .peer
}

# stage NAME SECONDS COMMAND...: one picked stage under its time limit, logged to $out/NAME.log;
# a stage that fails or runs out of time is reported and the next one runs.
stage() {
  local name=$1 limit=$(($2 * ${slower:-1})) start=$SECONDS  # a CPU's tiny run: twice as long
  shift 2
  [[ " ${stages[*]} " == *" $name "* ]] || return 0
  echo "== $name (limit ${limit}s): $*"
  if timeout "$limit" "$@" > "$out/$name.log" 2>&1; then
    echo "   done in $((SECONDS - start))s"
  else
    echo "   FAILED (exit $?) after $((SECONDS - start))s; last lines:"
    tail -5 "$out/$name.log"
  fi
  if [ -n "${PACK:-}" ]; then  # the traces apart, so that their size cannot hold back the rest
    local traces="${PACK%.tar.gz}_traces.tar.gz"
    archive "$PACK" --exclude='*.xplane.pb' --exclude='*.trace.json.gz' \
      --exclude="${PACK##*/}" --exclude="${traces##*/}" -C "$out" .
    [ ! -d "$out/trace" ] || archive "$traces" --exclude='*.trace.json.gz' -C "$out" trace
  fi
}

# archive DEST TAR_ARGS...: a gzipped tar written outside the folder it packs, then moved.
archive() {
  local dest=$1 tmp
  shift
  tmp=$(mktemp) && tar czf "$tmp" "$@" && chmod 644 "$tmp" && mv "$tmp" "$dest" \
    || { echo "gpu.sh: packing $dest failed" >&2; rm -f "$tmp"; }
}

run() {
  set -f  # stage names, not file patterns
  stages=(${STAGES-$ALL_STAGES})
  set +f
  [ ${#stages[@]} -gt 0 ] || { echo "gpu.sh: STAGES names no stage: $ALL_STAGES" >&2; exit 2; }
  for name in "${stages[@]}"; do
    [[ " $ALL_STAGES " == *" $name "* ]] \
      || { echo "gpu.sh: STAGES names '$name'; the stages are: $ALL_STAGES" >&2; exit 2; }
  done
  out=${OUT:-benchmarks/results/gpu}
  mkdir -p "$out"
  local install=(python3 -m pip install -q --no-index --no-deps --no-compile --upgrade)
  "${install[@]}" --target /tmp/site .whl/*.whl
  "${install[@]}" --target /tmp/peer-site .peer-whl/*.whl
  export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
  # PureJaxRL's Python for peers.py: the peer wheels first on its path
  printf '#!/bin/sh\nPYTHONPATH=/tmp/peer-site:/tmp/site exec python3 "$@"\n' > /tmp/peer-python
  chmod +x /tmp/peer-python
  # peers.py's runs: PureJaxRL and rejax under the peer wheels, Brax's sides all under purerl's
  local purejaxrl=(python3 benchmarks/peers.py --purejaxrl .peer --peer-python /tmp/peer-python)
  local rejax=(python3 benchmarks/peers.py --peer rejax --peer-python /tmp/peer-python)
  local brax=(python3 benchmarks/peers.py --peer brax --peer-python "$(command -v python3)")
  if [ "${SIZES:-gpu}" = tiny ]; then
    local rows=(4envs 8seeds) profiled=(--rows 4envs --total-timesteps 20000)
    local plans=(--rows 1024envs --total-timesteps 500000)
    rejax+=(--rows breakout --total-timesteps 20000) brax+=(--rows hopper --total-timesteps 10240)
    local envs=(64 256) timesteps=500_000 memory_envs=(64) turns=1 slower=2
  else
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.csv"
    local rows=(4096envs 65536envs 16seeds)
    local profiled=(--rows 65536envs --total-timesteps 25165824)  # 3 updates
    local plans=(--rows 65536envs --total-timesteps 50331648)  # 6 updates
    rejax+=(--rows breakout-gpu) brax+=(--rows gpu)
    local envs=(4096 65536) timesteps=50_000_000 memory_envs=(4096 16384) turns=2
  fi
  stage plans 150 "${purejaxrl[@]}" "${plans[@]}" --plans --repeats 1 --out "$out/plans.json"
  stage profile 120 "${purejaxrl[@]}" "${profiled[@]}" --repeats 1 --profile "$out/trace" \
    --out "$out/profile.json"
  stage peers 300 "${purejaxrl[@]}" --rows "${rows[@]}" --repeats "$turns" --out "$out/peers.json"
  stage rejax 180 "${rejax[@]}" --repeats 1 --out "$out/rejax.json"
  stage brax 240 "${brax[@]}" --repeats 1 --out "$out/brax.json"
  stage throughput 120 python3 benchmarks/throughput.py --num-envs "${envs[@]}" \
    --timesteps "$timesteps" --repeats 2 --out "$out/throughput.json"
  stage memory 60 python3 benchmarks/throughput.py --memory --num-envs "${memory_envs[@]}" \
    --out "$out/memory.json"
}

case "${1:-}" in
  fetch) shift; fetch "$@" ;;
  run) run ;;
  *) echo "usage: bash benchmarks/gpu.sh fetch [CHECKOUT] | run" >&2; exit 2 ;;
esac
