#!/usr/bin/env bash
# The built wheel works: build it, install it (not editable) into a fresh virtual environment
# and train CartPole from a directory outside the repository; summary.json must appear. Not part
# of `python -m pytest` (it takes about a minute): run `bash tests/wheel_smoke.sh` (`build` comes
# with the test extra).
#
# The virtual environment sees this interpreter's packages (--system-site-packages), so JAX and
# the rest are not downloaded again; purerl itself is imported from the wheel (checked below),
# even where an editable install of it is in this interpreter's site-packages.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python -m build --wheel --outdir "$work/dist" "$repo" > "$work/build.log" 2>&1 \
    || { tail -20 "$work/build.log"; exit 1; }
wheel=("$work"/dist/purerl-*.whl)
# Read the listing in Python: `grep -q` in a pipe closes it early, and under pipefail the
# lister's broken pipe would fail the check.
python -c 'import sys, zipfile; sys.exit(sys.argv[2] not in zipfile.ZipFile(sys.argv[1]).namelist())' \
    "${wheel[0]}" "purerl/conf/env/cartpole.yaml" \
    || { echo "wheel_smoke: conf/ is not in ${wheel[0]##*/}"; exit 1; }

python -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "${wheel[0]}"
problems="$("$work/venv/bin/python" -m pip check 2>&1 || true)"  # purerl's dependencies there
if grep "^purerl " <<< "$problems"; then exit 1; fi

mkdir "$work/elsewhere" && cd "$work/elsewhere"
where="$("$work/venv/bin/python" -c 'import purerl; print(purerl.__file__)')"
[[ "$where" == "$work/venv/"* ]] || { echo "wheel_smoke: purerl imported from $where"; exit 1; }
"$work/venv/bin/purerl-train" --version
"$work/venv/bin/purerl-train" +env=cartpole total_timesteps=50_000
summary="$(find outputs -name summary.json)"
[[ -n "$summary" ]] || { echo "wheel_smoke: no summary.json under $work/elsewhere/outputs"; exit 1; }
"$work/venv/bin/python" - "$summary" "${wheel[0]##*/}" <<'EOF'
import json, sys
summary = json.load(open(sys.argv[1]))
print(f"wheel_smoke: ok: {sys.argv[2]}, {sys.argv[1]}: status {summary['status']}, "
      f"final return {summary['final_return']}")
EOF
