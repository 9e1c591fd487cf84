"""Time the commands of docs/guides/dataset-to-agent.md as a user runs them (the figures of
docs/results/dataset-to-agent.md).

    python docs/scripts/dataset_to_agent_times.py WORK_DIR [--json OUT.json]

WORK_DIR is made fresh (it must not exist): the data goes to WORK_DIR/data/toyworld, the commands run from
WORK_DIR/project, exactly as the guide writes them (the installed ``vidlab`` beside this Python). For the Ray steps a
Ray head is started on 127.0.0.1 (``ray start --head --block`` in its own process group, stopped at the end; a
HOME inside WORK_DIR keeps the machine's ~/.ray out). Each command's wall time, exit status and the load average
around it are printed as a table and written as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
STEPS = [
    ("toyworld-data", "vidlab toyworld-data ../data/toyworld 2 --world where"),
    ("classify", "vidlab classify --data ../data/toyworld/test/questions.jsonl --policy toy:where "
                 "--out runs/labelled.jsonl classify.k=1"),
    ("train-agent trl", "vidlab train-agent --engine trl --preset trl-tiny --data runs/labelled.jsonl "
                        "--out runs/trl max_steps=1"),
    ("eval-qa local", "vidlab eval-qa --benchmark jsonl --data runs/labelled.jsonl --policy hf:runs/trl/final "
                      "--strategies uniform:4 --limit 2 --out runs/eval episode.max_new_tokens=8"),
    ("eval-qa ray", "vidlab eval-qa --benchmark jsonl --data runs/labelled.jsonl --policy hf:runs/trl/final "
                    "--strategies uniform:4 --limit 2 --out runs/eval-ray episode.max_new_tokens=8 --backend ray"),
    ("train-agent verl", "vidlab train-agent --engine verl --preset verl-qwen3-vl-8b --data runs/labelled.jsonl "
                         "--out runs/verl"),
    ("ray_job.sh --dry-run", "bash runs/verl/ray_job.sh --dry-run"),
]  # fmt: skip


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _head(work: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    temp = tempfile.mkdtemp(prefix="vlray", dir="/tmp")  # Ray's socket paths must be short
    port = _port()
    head = subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={_port()}",
         "--dashboard-host=127.0.0.1", f"--dashboard-port={port}", "--num-cpus=1", "--disable-usage-stats",
         f"--temp-dir={temp}"],
        env=env, stdout=open(work / "head.log", "w"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    import urllib.error
    import urllib.request

    while True:  # up when the dashboard answers (any HTTP answer)
        if head.poll() is not None:
            raise SystemExit(f"the Ray head stopped: see {work / 'head.log'}")
        try:
            urllib.request.urlopen(url + "/api/jobs/", timeout=5).close()
            break
        except urllib.error.HTTPError:
            break
        except OSError:
            time.sleep(1)
    return head, url


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True)
    project = work / "project"
    project.mkdir()
    (work / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env.update(HOME=str(work / "home"), PATH=f"{BIN}{os.pathsep}{env['PATH']}", RAY_PYTHON=sys.executable)
    rows = []
    head = None
    try:
        for name, command in STEPS:
            if name == "ray_job.sh --dry-run":
                head, url = _head(work, env)
                env["RAY_ADDRESS"] = url
            load0 = os.getloadavg()[0]
            t0 = time.perf_counter()
            res = subprocess.run(command, shell=True, cwd=project, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            rows.append({"step": name, "command": command, "seconds": round(seconds, 1), "rc": res.returncode,
                         "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)})  # fmt: skip
            (work / f"{name.replace(' ', '_')}.log").write_text(res.stdout + res.stderr)
            print(f"{name:22s} {seconds:7.1f} s  rc {res.returncode}  load {load0:.2f}", flush=True)
            if res.returncode != 0:
                print(res.stderr[-2000:], file=sys.stderr)
                break
    finally:
        if head is not None:
            os.killpg(head.pid, signal.SIGTERM)
            head.wait(120)
    record = {
        "cpus": os.cpu_count(),
        "steps": rows,
        "total_seconds": round(sum(r["seconds"] for r in rows), 1),
    }
    if args.json:
        args.json.write_text(json.dumps(record, indent=1))
    return 0 if rows and all(r["rc"] == 0 for r in rows) and len(rows) == len(STEPS) else 1


if __name__ == "__main__":
    raise SystemExit(main())
