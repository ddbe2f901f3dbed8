"""The Kubernetes examples in examples/k8s/: each manifest is a valid batch/v1 object by the
schema of the official client's own models (tests/fixtures/k8s/record.py; ``kubectl apply
--dry-run=client`` too where kubectl is installed), the Indexed Job hands each pod its shard,
and its 4 pods' commands, run as 4 processes on one folder, remove what one run would."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.folders import scaled

ROOT = Path(__file__).parents[2]
K8S = ROOT / "examples" / "k8s"
SCHEMAS = ROOT / "tests" / "fixtures" / "k8s"
MANIFESTS = {"gc-cronjob.yaml": "batch-v1-cronjob", "gc-indexed-job.yaml": "batch-v1-job"}


def _errors(manifest: dict[str, Any], schema: str) -> list[str]:
    """Every schema error, the innermost ones of an ``anyOf`` (a field or null) included."""
    import jsonschema

    checker = jsonschema.Draft202012Validator(
        json.loads((SCHEMAS / f"{schema}.schema.json").read_text())
    )

    def leaves(error: Any) -> list[str]:
        if error.context:
            return [m for sub in error.context for m in leaves(sub)]
        return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}"]

    return [m for e in checker.iter_errors(manifest) for m in leaves(e)]


@pytest.mark.parametrize(("name", "schema"), MANIFESTS.items())
def test_each_manifest_is_valid_by_the_kubernetes_schema(name: str, schema: str) -> None:
    manifest = yaml.safe_load((K8S / name).read_text())
    assert manifest["apiVersion"] == "batch/v1"
    assert _errors(manifest, schema) == []


def test_the_schema_check_can_fail() -> None:
    job = yaml.safe_load((K8S / "gc-indexed-job.yaml").read_text())
    job["spec"]["completionMod"] = "Indexed"  # a typo: not a field
    job["spec"]["parallelism"] = "four"
    del job["spec"]["template"]["spec"]["containers"][0]["name"]  # required
    found = " ".join(_errors(job, "batch-v1-job"))
    assert "completionMod" in found
    assert "four" in found
    assert "'name' is a required property" in found


@pytest.mark.skipif(
    shutil.which("kubectl") is None or not os.environ.get("KVTOOL_KUBECTL_DRY_RUN"),
    reason="kubectl apply --dry-run=client asks a cluster's API server (set"
    " KVTOOL_KUBECTL_DRY_RUN=1 where kubectl reaches one); the schema check stands in",
)
@pytest.mark.parametrize("name", MANIFESTS)
def test_kubectl_takes_each_manifest(name: str) -> None:
    done = subprocess.run(
        ["kubectl", "apply", "--dry-run=client", "--request-timeout=20s", "-f", str(K8S / name)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _pods(job: dict[str, Any], uid: str) -> list[list[str]]:
    """Each pod's command as the Job controller and the kubelet make it: JOB_COMPLETION_INDEX
    set to the pod's index, $(VAR) expanded from the container's env (the uid from the label)."""
    spec = job["spec"]
    (container,) = spec["template"]["spec"]["containers"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"JOB_UID": "metadata.labels['batch.kubernetes.io/controller-uid']"}
    pods = []
    for index in range(spec["completions"]):
        values = {"JOB_COMPLETION_INDEX": str(index), "JOB_UID": uid}

        def value(m: re.Match[str], values: dict[str, str] = values) -> str:
            return values[m.group(1)]

        pods.append([re.sub(r"\$\((\w+)\)", value, a) for a in container["command"]])
    return pods


def test_the_indexed_jobs_pods_remove_what_one_run_would(tmp_path: Path) -> None:
    job = yaml.safe_load((K8S / "gc-indexed-job.yaml").read_text())
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"] == 4  # under --max-size all wait for all
    pods = _pods(job, "4c5e1f3a-0b7d-4d6e-9f21-7a1b2c3d4e5f")
    assert [p[p.index("--shard") + 1] for p in pods] == ["0/4", "1/4", "2/4", "3/4"]
    kv, logs = tmp_path / "kv", tmp_path / "kv-log"
    scaled.make(kv, 3000)
    logs.mkdir()
    total = sum(p.stat().st_size for p in kv.rglob("*") if p.is_file())

    def local(argv: list[str]) -> list[str]:
        out = [a.replace("/kv-log", str(logs)) if a.startswith("/kv-log") else a for a in argv]
        out = [str(kv) if a == "/kv" else a for a in out]
        cap = out.index("--max-size") + 1
        out[cap] = f"{total // 2 // 1024}KiB"  # half the folder: the shards must agree
        return [sys.executable, "-m", "kvtool", *out[1:], "--grace", "0s", "--list", "--json"]

    env = {**os.environ, "NO_COLOR": "1"}
    one = subprocess.run(
        [*local(pods[0])[: local(pods[0]).index("--shard")], "--grace", "0s", "--dry-run",
         "--list", "--json"], capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert one.returncode == 0, one.stderr
    whole = {f["path"] for f in json.loads(one.stdout)["files"]}
    runs = [subprocess.Popen(local(p), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env) for p in pods]  # fmt: skip
    removed = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        removed.append({f["path"] for f in json.loads(out)["files"]})
    assert sum(map(len, removed)) == len(whole)  # no file removed by two pods
    assert set().union(*removed) == whole
    assert sorted(p.name for p in logs.iterdir()) == [f"gc-{k}.jsonl" for k in range(4)]
