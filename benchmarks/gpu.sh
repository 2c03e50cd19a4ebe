#!/usr/bin/env bash
# purerl's benchmarks on a lent GPU machine, prepared here and run there in one call.
#
#   bash benchmarks/gpu.sh fetch   # here, with PyPI: wheels the GPU image lacks -> .whl/ and
#                                  # .peer-whl/, a PureJaxRL checkout -> .peer/purejaxrl
#   bash benchmarks/gpu.sh run     # there (device tool, carry: .whl .peer-whl .peer): installs
#                                  # the wheels, then writes JSON under $OUT (default results/gpu)
#
# The GPU image (Python 3.12) has jax with CUDA, flax, optax, chex, orbax, matplotlib and tqdm;
# it lacks gymnax, Hydra and tensorboardX for purerl, and gymnax 0.0.9, distrax (with
# tensorflow-probability), brax and navix for PureJaxRL's ppo.py, which live in a target of
# their own since the two gymnax versions conflict. `run` measures, each in its own process:
# throughput.py at 4096-65536 envs; the whole-run program of both sides taking turns
# (peer_driver.py) at 4096-65536 envs and 8-64 vmapped seeds; memory.py at 4096 and 16384 envs.
# Not yet run: no GPU has been lent to a purerl task since this script was written.
set -euo pipefail
cd "$(dirname "$0")/.."

PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux1_x86_64 --platform any)
PURERL_WHEELS=(gymnax==1.0.1 hydra-core==1.3.8 omegaconf==2.3.1 tensorboardX==2.6.5 six==1.17.0)
SOURCE_ONLY=(antlr4-python3-runtime==4.9.3)  # pure Python, published as a source archive only
# What PureJaxRL's ppo.py imports beyond the image (its wrappers.py imports brax and navix), at
# the versions of the CPU peer venv of benchmarks/README.md.
PEER_WHEELS=(gymnax==0.0.9 distrax==0.1.9 tfp-nightly==0.26.0.dev20261027 dm-tree==0.1.10
             decorator==5.3.1 gast==0.7.0 brax==0.14.2 mujoco==4.0.0 mujoco-core==4.0.0
             mujoco-mjx==3.17.0 trimesh==5.2.0 dm-env==1.6 ml-collections==1.1.0 jaxopt==0.8.5
             navix==0.7.4 gymnasium==1.4.0 farama-notifications==0.0.6 tensorboardX==2.6.5)

fetch() {
  for target in .whl .peer-whl .peer; do
    grep -qx "/$target/" .git/info/exclude 2>/dev/null || echo "/$target/" >> .git/info/exclude
  done
  local pip=(python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12
             --implementation cp "${PLATFORMS[@]}")
  "${pip[@]}" -d .whl "${PURERL_WHEELS[@]}"
  python3 -m pip wheel -q --no-deps -w .whl "${SOURCE_ONLY[@]}"
  "${pip[@]}" -d .peer-whl "${PEER_WHEELS[@]}"
  if [ ! -d .peer/purejaxrl ]; then
    echo "gpu.sh: clone https://github.com/luchris429/purejaxrl into .peer/purejaxrl" >&2
    exit 1
  fi
  du -sh .whl .peer-whl .peer
}

run() {
  local out=${OUT:-benchmarks/results/gpu}
  mkdir -p "$out"
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peer-site \
    .peer-whl/*.whl
  export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.csv"
  python3 benchmarks/throughput.py --num-envs 4096 16384 65536 --timesteps 50_000_000 \
    --repeats 3 --out "$out/throughput.json" 2>&1 | tee "$out/throughput.log"
  local programs='[{"num_envs": 4096, "total_timesteps": 50000000, "num_seeds": 1},
                   {"num_envs": 65536, "total_timesteps": 200000000, "num_seeds": 1},
                   {"num_envs": 4, "total_timesteps": 1000000, "num_seeds": 8},
                   {"num_envs": 4, "total_timesteps": 1000000, "num_seeds": 64}]'
  for turn in 1 2; do
    python3 benchmarks/peer_driver.py purerl "$programs" "$out/purerl_$turn.json"
    PYTHONPATH="/tmp/peer-site" python3 benchmarks/peer_driver.py purejaxrl "$programs" \
      "$out/purejaxrl_$turn.json" --purejaxrl .peer/purejaxrl
  done 2>&1 | tee "$out/peers.log"
  python3 benchmarks/memory.py --num-envs 4096 16384 --out "$out/memory.json" \
    2>&1 | tee "$out/memory.log"
}

case "${1:-}" in
  fetch) fetch ;;
  run) run ;;
  *) echo "usage: bash benchmarks/gpu.sh fetch|run" >&2; exit 2 ;;
esac
