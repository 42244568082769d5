#!/usr/bin/env python3
"""Checks the cluster launch files in config/ (docs/deploy.md), as CI does: the Slurm batch
script parses (bash -n; shellcheck too where installed) and launches one daemon per node on
the PostgreSQL URL from the environment; the Kubernetes manifest parses as YAML and has the
kinds and fields a deployment needs, with every reference (labels, Secrets, ConfigMaps,
claims, the store's Service) pointing at something the manifest defines. Prints TAP.
Run: KAGENT_SOURCE_DIR=. python3 tests/config/check_deploy.py"""
import os
import re
import shutil
import subprocess
import sys

import yaml

SOURCE = os.path.abspath(os.environ.get("KAGENT_SOURCE_DIR", "."))
SLURM = os.path.join(SOURCE, "config", "kagentd.slurm")
KUBERNETES = os.path.join(SOURCE, "config", "kagentd-kubernetes.yaml")
REQUIRED_KINDS = {"Namespace", "Secret", "Service", "StatefulSet", "DaemonSet", "ConfigMap",
                  "PersistentVolumeClaim"}


def slurm_syntax():
    result = subprocess.run(["bash", "-n", SLURM], capture_output=True, text=True)
    return [f"bash -n: {result.stderr}"] if result.returncode else []


def slurm_shellcheck():
    if shutil.which("shellcheck") is None:
        return None  # a skip: not every machine has it
    result = subprocess.run(["shellcheck", SLURM], capture_output=True, text=True)
    return [result.stdout] if result.returncode else []


def slurm_content():
    text = open(SLURM).read()
    problems = []
    for pattern, what in [
            (r"^#!/usr/bin/env bash", "a bash shebang"),
            (r"^#SBATCH --ntasks-per-node=1$", "one task per node"),
            (r"^#SBATCH --gpus-per-node=", "GPUs from the allocation"),
            (r'KAGENT_STORE:\?', "KAGENT_STORE required from the environment"),
            (r"\bsrun\b.*--ntasks-per-node=1", "srun, one daemon per node"),
            (r'--store "\$KAGENT_STORE"', "the store from the environment"),
            (r'exec "\$KAGENT" "\$\{arguments\[@\]\}"', "the daemon exec'd")]:
        if not re.search(pattern, text, re.MULTILINE):
            problems.append(f"no {what} ({pattern})")
    return problems


def documents():
    with open(KUBERNETES) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def named(docs, kind, name):
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    return found[0] if found else None


def kubernetes_shape():
    docs = documents()
    problems = []
    kinds = {d.get("kind") for d in docs}
    if REQUIRED_KINDS - kinds:
        problems.append(f"missing kinds: {sorted(REQUIRED_KINDS - kinds)}")
    for d in docs:
        for field in ("apiVersion", "kind", "metadata"):
            if field not in d:
                problems.append(f"a document without {field}: {d}")
        if "metadata" in d and not d["metadata"].get("name"):
            problems.append(f"a {d.get('kind')} without a name")
    return problems


def check_workload(docs, workload, problems):
    spec = workload["spec"]
    labels = spec["template"]["metadata"]["labels"]
    selector = spec["selector"]["matchLabels"]
    name = workload["metadata"]["name"]
    if any(labels.get(key) != value for key, value in selector.items()):
        problems.append(f"{name}: selector {selector} does not match labels {labels}")
    pod = spec["template"]["spec"]
    for volume in pod.get("volumes", []):
        if "configMap" in volume and named(docs, "ConfigMap", volume["configMap"]["name"]) \
                is None:
            problems.append(f"{name}: no ConfigMap {volume['configMap']['name']}")
        if "secret" in volume and named(docs, "Secret", volume["secret"]["secretName"]) is None:
            problems.append(f"{name}: no Secret {volume['secret']['secretName']}")
        claim = volume.get("persistentVolumeClaim", {}).get("claimName")
        if claim and named(docs, "PersistentVolumeClaim", claim) is None:
            problems.append(f"{name}: no PersistentVolumeClaim {claim}")
    for container in pod["containers"]:
        mounts = {m["name"] for m in container.get("volumeMounts", [])}
        volumes = {v["name"] for v in pod.get("volumes", [])}
        volumes |= {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
        if mounts - volumes:
            problems.append(f"{name}: mounts without volumes: {sorted(mounts - volumes)}")
        for variable in container.get("env", []):
            reference = variable.get("valueFrom", {}).get("secretKeyRef")
            if reference:
                secret = named(docs, "Secret", reference["name"])
                if secret is None or reference["key"] not in secret.get("stringData", {}):
                    problems.append(f"{name}: {variable['name']} names a missing secret key "
                                    f"{reference}")


def kubernetes_references():
    docs = documents()
    problems = []
    for workload in by_kind(docs, "DaemonSet") + by_kind(docs, "StatefulSet"):
        check_workload(docs, workload, problems)
    for service in by_kind(docs, "Service"):
        selector = service["spec"]["selector"]
        if not any(all(w["spec"]["template"]["metadata"]["labels"].get(k) == v
                       for k, v in selector.items())
                   for w in by_kind(docs, "DaemonSet") + by_kind(docs, "StatefulSet")):
            problems.append(f"Service {service['metadata']['name']} selects no workload")
    return problems


def kubernetes_daemons():
    docs = documents()
    problems = []
    daemons = by_kind(docs, "DaemonSet")
    if len(daemons) != 1:
        return [f"{len(daemons)} DaemonSets"]
    pod = daemons[0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    arguments = container.get("command", []) + container.get("args", [])
    if arguments[:2] != ["kagent", "daemon"]:
        problems.append(f"the DaemonSet runs {arguments[:2]}, not kagent daemon")
    for flag in ("--listen", "--token-file", "--lease"):
        if flag not in arguments:
            problems.append(f"kagent daemon without {flag}")
    if "nvidia.com/gpu" not in container.get("resources", {}).get("limits", {}):
        problems.append("the daemons ask for no GPUs (resources.limits nvidia.com/gpu)")
    if not pod.get("nodeSelector"):
        problems.append("the daemons are not limited to GPU nodes (nodeSelector)")
    store = [v for v in container.get("env", []) if v["name"] == "KAGENT_STORE"]
    if not store or "secretKeyRef" not in store[0].get("valueFrom", {}):
        problems.append("KAGENT_STORE does not come from a Secret")
    else:
        reference = store[0]["valueFrom"]["secretKeyRef"]
        url = named(docs, "Secret", reference["name"])["stringData"][reference["key"]]
        host = re.match(r"postgres(?:ql)?://(?:[^@/]*@)?([^:/]+)", url)
        services = {f"{s['metadata']['name']}.{s['metadata'].get('namespace', 'default')}.svc"
                    for s in by_kind(docs, "Service")}
        if host is None or host.group(1) not in services | {
                s["metadata"]["name"] for s in by_kind(docs, "Service")}:
            problems.append(f"the store URL {url} names no Service of the manifest")
        postgres = [s for s in by_kind(docs, "StatefulSet")
                    if "postgres" in s["spec"]["template"]["spec"]["containers"][0]["image"]]
        if not postgres:
            problems.append("no PostgreSQL StatefulSet")
    return problems


CASES = [
    ("the Slurm script parses (bash -n)", slurm_syntax),
    ("the Slurm script passes shellcheck", slurm_shellcheck),
    ("the Slurm script: one daemon per node, GPUs and store from the job", slurm_content),
    ("the Kubernetes manifest parses and has the kinds it needs", kubernetes_shape),
    ("the Kubernetes manifest's references resolve", kubernetes_references),
    ("the Kubernetes manifest: a daemon per GPU node on the PostgreSQL Service",
     kubernetes_daemons),
]


def main():
    print(f"1..{len(CASES)}")
    failed = 0
    for number, (name, case) in enumerate(CASES, 1):
        try:
            problems = case()
        except Exception as error:  # noqa: BLE001 - a broken file is a failure
            problems = [f"{type(error).__name__}: {error}"]
        if problems is None:
            print(f"ok {number} - {name} # SKIP not installed")
            continue
        print(f"{'ok' if not problems else 'not ok'} {number} - {name}")
        for problem in problems:
            for line in str(problem).splitlines():
                print(f"# {line}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
