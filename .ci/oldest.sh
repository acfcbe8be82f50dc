#!/usr/bin/env bash
# The declared floors, tested: every `name>=version` of pyproject's [project] dependencies
# installed at exactly that version (pip constraints) in a fresh venv, with the test tools,
# then the tests of the compiled kernels and the core models on them. A floor that no longer
# holds (a SciPy function or export used that the oldest release lacks, a NumPy summation
# order the kernels copy) fails here. Run from a checkout; about 2-3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=$(mktemp -d /tmp/crowdbudget-oldest.XXXXXX)
trap 'rm -rf "$VENV"' EXIT
python3 -m venv "$VENV"
python3 - > "$VENV/floors.txt" <<'PY'
import re
import tomllib

with open("pyproject.toml", "rb") as f:
    dependencies = tomllib.load(f)["project"]["dependencies"]
for requirement in dependencies:
    floor = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)>=([0-9][0-9A-Za-z.]*)", requirement)
    if floor is None:
        raise SystemExit(f"pyproject dependency without a plain floor: {requirement!r}")
    name = floor[1].split("[")[0]  # a constraint names no extras
    print(f"{name}=={floor[2]}")
PY
echo "oldest declared versions: $(tr '\n' ' ' < "$VENV/floors.txt")" >&2
"$VENV/bin/pip" install -q -c "$VENV/floors.txt" -e . pytest "hypothesis>=6.100" "mpmath>=1.3"
# a cache of compiled kernels of its own: the checkout's may hold the newer Numba's
export NUMBA_CACHE_DIR="$VENV/numba-cache"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    tests/test_compiled_special.py tests/test_one_coin_kernel.py tests/test_beta_bernoulli.py \
    tests/test_worker_aware_speed.py tests/test_one_coin.py tests/test_feature_kg.py \
    tests/test_aggregation.py tests/test_lean_load.py tests/test_bds_kernel.py
