"""Server memory per campaign item: the resident set (RSS) a campaign of n items adds to the
service process, to size ``ServiceSettings.max_items_per_campaign``.

Each case runs in a fresh Python process: the service app on a temporary SQLite file, one
small campaign first (imports, JIT compilation and the store's connections are paid before
the baseline), then ``--campaigns`` campaigns of n items created over the HTTP API (FastAPI's
TestClient: the JSON body parsed as the server parses it), each followed by one worker's first
assignment and label. Reports per case the RSS after every campaign (garbage collected) minus
the baseline, per 10^5 items, and the process's peak RSS (``ru_maxrss``, which includes the
transient cost of parsing the request). Run from the repository root:

    python benchmarks/bench_campaign_memory.py [--items 10000,100000,200000] [--campaigns 2]
        [--policy opt-kg] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

_CHILD = r"""
import gc, json, resource, sys, tempfile
import psutil
from fastapi.testclient import TestClient
from crowdbudget.service import create_app
from crowdbudget.service.settings import ServiceSettings

n_items, n_campaigns, policy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
settings = ServiceSettings(
    max_items_per_campaign=10**7,
    max_items_per_request=10**7,
    max_body_bytes=2**31 - 1,
    requests_per_second_per_key=1e9,
    request_burst_per_key=10**9,
)
process = psutil.Process()


def rss() -> float:
    gc.collect()
    return process.memory_info().rss / 2**20


with tempfile.TemporaryDirectory() as tmp:
    client = TestClient(create_app(f"sqlite:///{tmp}/m.db", settings=settings))

    def campaign(n: int) -> None:
        body = {"items": [f"item-{k:08d}" for k in range(n)], "budget": 10 * n, "policy": policy}
        created = client.post("/v1/campaigns", json=body)
        assert created.status_code == 201, created.text
        cid, key = created.json()["campaign_id"], created.json()["requester_key"]
        boss = {"Authorization": f"Bearer {key}"}
        worker = client.post(f"/v1/campaigns/{cid}/workers", json={"worker_id": "w"}, headers=boss)
        token = {"Authorization": f"Bearer {worker.json()['worker_token']}"}
        work = client.post(f"/v1/campaigns/{cid}/assignments", headers=token).json()
        path = f"/v1/campaigns/{cid}/assignments/{work['assignment_id']}/label"
        assert client.post(path, json={"label": "1"}, headers=token).status_code == 200

    campaign(100)
    baseline = rss()
    after = []
    for _ in range(n_campaigns):
        campaign(n_items)
        after.append(rss() - baseline)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(json.dumps({"baseline_mib": baseline, "added_mib": after, "peak_mib": peak}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="10000,100000,200000")
    parser.add_argument("--campaigns", type=int, default=2)
    parser.add_argument("--policy", default="opt-kg")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    for n_items in [int(n) for n in args.items.split(",")]:
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(n_items), str(args.campaigns), args.policy],
            capture_output=True,
            text=True,
            check=True,
        )
        row = {"n_items": n_items, "policy": args.policy, **json.loads(out.stdout)}
        added = row["added_mib"]
        per_campaign = [b - a for a, b in zip([0.0, *added[:-1]], added, strict=True)]
        row["mib_per_1e5_items"] = [m * 1e5 / n_items for m in per_campaign]
        rows.append(row)
        shown = ", ".join(f"{m:.1f}" for m in row["mib_per_1e5_items"])
        print(
            f"{args.policy:>10} n={n_items:>8}: baseline {row['baseline_mib']:.0f} MiB, "
            f"per campaign +{', +'.join(f'{m:.1f}' for m in per_campaign)} MiB "
            f"({shown} MiB per 10^5 items), peak {row['peak_mib']:.0f} MiB",
            flush=True,
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
