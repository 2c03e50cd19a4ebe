#!/usr/bin/env bash
# purerl's benchmarks on a lent GPU machine, prepared here and run there.
#
#   bash benchmarks/gpu.sh fetch [CHECKOUT]  # here, with PyPI: the wheels the GPU image lacks
#                                            # (.whl/, .peer-whl/), PureJaxRL's purejaxrl/ from
#                                            # CHECKOUT (default ../purejaxrl), lean, in .peer/
#   bash benchmarks/gpu.sh run               # there (device tool, carry: .whl .peer-whl .peer)
#   SIZES=tiny bash benchmarks/gpu.sh run    # the same stages at CPU sizes, to check it here
#   STAGES="rejax brax" bash benchmarks/gpu.sh run   # only those stages, in run's order
#   PACK=$OUT/gpu.tar.gz OUT=/tmp/gpu bash benchmarks/gpu.sh run   # results packed after each
#                                            # stage (the profile's traces in gpu_traces.tar.gz)
#
# The GPU image (Python 3.12, jax 0.11 with CUDA) lacks gymnax, Hydra and tensorboardX; the
# wheels pin purerl's libraries to the CPU suite's versions. PureJaxRL's gymnax 0.0.9 and distrax
# install into a target of their own, first on the peers' path; it runs lean (`DEBUG: False`,
# its wrappers.py's brax and navix imports left out). Stages, each under a time limit (together
# more than one device call's 600 s): plans, profile (`peers.py --plans`, `--profile` at 65,536
# envs), peers (4,096 and 65,536 envs, 16 seeds), rejax, brax (lean against purerl),
# throughput, memory.
set -euo pipefail
cd "$(dirname "$0")/.."

PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux1_x86_64 --platform any)
PURERL_WHEELS=(gymnax==1.0.1 hydra-core==1.3.8 omegaconf==2.3.1 tensorboardX==2.6.5 six==1.17.0
               flax==0.12.8 optax==0.2.8 chex==0.1.92 orbax-checkpoint==0.12.8
               gymnasium==1.4.0 farama-notifications==0.0.6
               brax==0.14.2 mujoco==4.0.1 mujoco-core==4.0.1 mujoco-mjx==3.17.0 glfw==2.11.0
               jaxopt==0.8.5 ml_collections==1.1.0 trimesh==5.2.0)
SOURCE_ONLY=(antlr4-python3-runtime==4.9.3)  # published as a source archive only
PEER_WHEELS=(gymnax==0.0.9 distrax==0.1.9 tfp-nightly==0.26.0.dev20261027 dm-tree==0.1.10
             decorator==5.3.1 gast==0.7.0 gymnasium==1.4.0 farama-notifications==0.0.6
             rejax==0.1.3)
ALL_STAGES="plans profile peers rejax brax throughput memory"

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
  "${pip[@]}" -d .whl "${PURERL_WHEELS[@]}"
  python3 -m pip wheel -q --no-deps -w .whl "${SOURCE_ONLY[@]}"
  "${pip[@]}" -d .peer-whl "${PEER_WHEELS[@]}"
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
  local name=$1 limit=$2 start=$SECONDS
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

# driver_turns PEER SIDE PATH PROGRAM...: purerl, then the peer's SIDE with PATH as its
# PYTHONPATH, on each program of benchmarks/peer_PEER.py.
driver_turns() {
  local peer=$1 side=$2 path=$3 i=0
  shift 3
  for program in "$@"; do
    i=$((i + 1))
    python3 "benchmarks/peer_$peer.py" purerl "$program" "$out/${peer}_purerl_${i}_1.json"
    PYTHONPATH="$path" python3 "benchmarks/peer_$peer.py" "$side" "$program" \
      "$out/${peer}_lean_${i}_1.json"
  done
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
  local peers=(python3 benchmarks/peers.py --purejaxrl .peer --peer-python /tmp/peer-python)
  if [ "${SIZES:-gpu}" = tiny ]; then
    local rows=(4envs 8seeds) profiled=(--rows 4envs --total-timesteps 20000)
    local plans=(--rows 1024envs --total-timesteps 500000)
    local rejax=('{"setting": "breakout", "num_seeds": 2, "total_timesteps": 20000}')
    local brax=(
      '{"setting": "inverted_pendulum", "num_envs": 64, "batch_size": 64, "total_timesteps": 20480}'
      '{"setting": "hopper", "num_envs": 32, "batch_size": 32, "total_timesteps": 10240}')
    local envs=(64 256) timesteps=500_000 memory_envs=(64) turns=1
  else
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.csv"
    local rows=(4096envs 65536envs 16seeds)
    local profiled=(--rows 65536envs --total-timesteps 25165824)  # 3 updates
    local plans=(--rows 65536envs --total-timesteps 50331648)  # 6 updates
    local rejax=('{"setting": "breakout", "num_seeds": 8}' '{"setting": "breakout", "num_seeds": 64}')
    local brax=(
      '{"setting": "inverted_pendulum", "num_envs": 4096, "total_timesteps": 10000000}'
      '{"setting": "inverted_pendulum", "num_envs": 65536, "batch_size": 2048,
        "total_timesteps": 20000000}'
      '{"setting": "hopper", "num_envs": 4096, "batch_size": 2048, "total_timesteps": 20000000}')
    local envs=(4096 65536) timesteps=50_000_000 memory_envs=(4096 16384) turns=2
  fi
  { python3 -c "import jax, flax; print('jax', jax.__version__, jax.devices(), 'flax',
                flax.__version__)"
    PYTHONPATH="/tmp/peer-site:/tmp/site" python3 -c "from importlib.metadata import version
print('peers:', *(f'{n} {version(n)}' for n in ('jax', 'flax', 'gymnax', 'distrax', 'rejax')))" \
      || echo "peers: their versions could not be read"; } | tee "$out/versions.txt"
  export -f driver_turns
  export out
  stage plans 150 "${peers[@]}" "${plans[@]}" --plans --repeats 1 --out "$out/plans.json"
  stage profile 120 "${peers[@]}" "${profiled[@]}" --repeats 1 --profile "$out/trace" \
    --out "$out/profile.json"
  stage peers 300 "${peers[@]}" --rows "${rows[@]}" --repeats "$turns" --out "$out/peers.json"
  stage rejax 180 bash -c 'driver_turns rejax rejax-lean /tmp/peer-site:/tmp/site "$@"' \
    rejax "${rejax[@]}"
  stage brax 240 bash -c 'driver_turns brax brax-lean "$PYTHONPATH" "$@"' brax "${brax[@]}"
  stage throughput 120 python3 benchmarks/throughput.py --num-envs "${envs[@]}" \
    --timesteps "$timesteps" --repeats 2 --out "$out/throughput.json"
  stage memory 60 python3 benchmarks/memory.py --num-envs "${memory_envs[@]}" \
    --out "$out/memory.json"
}

case "${1:-}" in
  fetch) shift; fetch "$@" ;;
  run) run ;;
  *) echo "usage: bash benchmarks/gpu.sh fetch [CHECKOUT] | run" >&2; exit 2 ;;
esac
