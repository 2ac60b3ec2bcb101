"""What a reviewer of deploy/k8s on a shared company cluster checks, checked offline on the
rendered overlays: the sandbox hosts see the same files as everyone else, egress reaches an
outside Temporal and model gateways, the read-only root has a writable home, Temporal's TLS
files are where the documented settings point (and tempi reads them), every Secret a pod
needs is one the docs create and none is in git, the autoscaler and the ServiceMonitor fit
the Deployment and tempi's queue, and the workers spread."""

from __future__ import annotations

import ipaddress
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tempi.config.errors import ConfigError
from tempi.web.access import operator_token
from tempi.workers.temporal_connection import load_settings
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE
from tempi.workflows.slack_types import slack_task_queue
from tests.k8s_render import K8S, OVERLAYS, POD_OWNERS, render

ROOT = K8S.parents[1]
OPERATIONS = ROOT / "docs" / "operations.md"
METADATA_ADDRESS = ipaddress.IPv4Network("169.254.169.254/32")
# The temporal scaler's trigger fields (KEDA pkg/scalers/temporal_scaler.go); each may also
# be given as NAMEFromEnv.
KEDA_TEMPORAL_FIELDS = {
    "endpoint", "namespace", "activationTargetQueueSize", "targetQueueSize", "taskQueue",
    "queueTypes", "workerDeploymentName", "workerDeploymentBuildId", "minConnectTimeout",
    "unsafeSsl", "tlsServerName",
}  # fmt: skip


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(K8S / "overlays" / request.param)


@pytest.fixture(scope="module")
def production() -> list[dict[str, Any]]:
    return render(K8S / "overlays" / "production")


def owners(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in POD_OWNERS]


def find(objects: list[dict[str, Any]], kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    [found] = [
        o for o in objects
        if o["kind"] == kind and o["metadata"]["name"] == name
        and namespace in (None, o["metadata"].get("namespace"))
    ]  # fmt: skip
    return found


def config(objects: list[dict[str, Any]], namespace: str) -> dict[str, str]:
    return find(objects, "ConfigMap", "tempi-config", namespace)["data"]


def volumes_by_mount(spec: dict[str, Any], container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    return {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}


def connects_to_temporal(container: dict[str, Any]) -> bool:
    return any(s.get("configMapRef", {}).get("name") == "tempi-config" for s in container.get("envFrom", []))


def test_the_sandbox_host_sees_the_claims_directories_at_their_paths(rendered: list[dict[str, Any]]) -> None:
    """The node's engine bind-mounts a workspace by its node path, and a claim cannot cross
    namespaces: the sandbox host mounts the node's directories at the very paths the other
    workers mount the claims at, and TEMPI_HOME is one of them."""
    [host] = [o for o in owners(rendered) if o["kind"] == "DaemonSet"]
    [worker] = [o for o in owners(rendered) if o["metadata"]["name"].startswith("tempi-worker")]
    host_spec, worker_spec = host["spec"]["template"]["spec"], worker["spec"]["template"]["spec"]
    host_mounts = volumes_by_mount(host_spec, host_spec["containers"][0])
    worker_mounts = volumes_by_mount(worker_spec, worker_spec["containers"][0])
    claimed = {
        path: v["persistentVolumeClaim"]["claimName"]
        for path, v in worker_mounts.items()
        if "persistentVolumeClaim" in v
    }
    assert set(claimed.values()) == {"tempi-sessions", "tempi-projects"}
    for path in claimed:
        host_path = host_mounts[path]["hostPath"]
        assert host_path["path"] == path and host_path["type"] == "Directory", path
    assert config(rendered, host["metadata"]["namespace"])["TEMPI_HOME"] in claimed
    assert config(rendered, worker["metadata"]["namespace"])["TEMPI_HOME"] in claimed
    # On the one-node dev cluster the claims are the node's directories too.
    for pv in (o for o in rendered if o["kind"] == "PersistentVolume"):
        ref = pv["spec"]["claimRef"]
        assert ref["namespace"] == worker["metadata"]["namespace"]
        assert claimed[pv["spec"]["hostPath"]["path"]] == ref["name"]
        claim = find(rendered, "PersistentVolumeClaim", ref["name"], ref["namespace"])
        assert claim["spec"]["volumeName"] == pv["metadata"]["name"]


def egress_rules(objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    return [
        rule
        for o in objects
        if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == namespace
        and "Egress" in o["spec"]["policyTypes"] and o["spec"]["podSelector"] == {}
        for rule in o["spec"]["egress"]
    ]  # fmt: skip


def allows_outside(rule: dict[str, Any], port: int) -> bool:
    """The rule lets a pod reach a public address on `port`."""
    ports = [p["port"] for p in rule.get("ports", [])]
    blocks = [ipaddress.IPv4Network(t["ipBlock"]["cidr"]) for t in rule["to"] if "ipBlock" in t]
    return (not ports or port in ports) and any(
        b.supernet_of(ipaddress.IPv4Network("8.8.8.8/32")) for b in blocks
    )


def test_egress_reaches_temporal_outside_the_cluster_and_model_gateways(
    rendered: list[dict[str, Any]],
) -> None:
    """From every namespace with tempi pods: Temporal on 7233 outside the cluster (Temporal
    Cloud), HTTPS, model gateways in the cluster by label on any port, in production one
    outside the cluster on its own port; never the metadata address."""
    for ns in {o["metadata"]["namespace"] for o in owners(rendered)}:
        rules = egress_rules(rendered, ns)
        address_port = int(config(rendered, ns)["TEMPORAL_ADDRESS"].rsplit(":", 1)[1])
        assert any(allows_outside(r, address_port) for r in rules), ns
        assert any(allows_outside(r, 7233) for r in rules), f"{ns}: no egress to Temporal Cloud"
        assert any(allows_outside(r, 443) for r in rules), ns
        assert any(
            not r.get("ports") and any(
                t.get("podSelector", {}).get("matchLabels") == {"tempi.dev/model-gateway": "true"}
                and t.get("namespaceSelector") == {}
                for t in r["to"]
            )
            for r in rules
        ), f"{ns}: no rule for labelled model gateways"  # fmt: skip
        for rule in rules:
            for target in rule["to"]:
                block = target.get("ipBlock")
                if block and ipaddress.IPv4Network(block["cidr"]).supernet_of(METADATA_ADDRESS):
                    excepted = [ipaddress.IPv4Network(e) for e in block.get("except", [])]
                    assert any(e.supernet_of(METADATA_ADDRESS) for e in excepted), f"{ns}: {block}"
        if ns in ("tempi", "tempi-sandbox"):
            gateways = [
                r for r in rules
                if any("ipBlock" in t for t in r["to"]) and r.get("ports")
                and not {p["port"] for p in r["ports"]} & {443, 7233, 53}
            ]  # fmt: skip
            assert gateways, f"{ns}: no egress to a model gateway outside the cluster"


def test_a_read_only_root_has_a_writable_home_cache_and_tmp(rendered: list[dict[str, Any]]) -> None:
    for owner in owners(rendered):
        spec = owner["spec"]["template"]["spec"]
        ns = owner["metadata"]["namespace"]
        for c in spec["containers"]:
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if connects_to_temporal(c):
                env = {**config(rendered, ns), **env}
            home = env.get("HOME")
            assert home, f"{owner['metadata']['name']}: HOME is not set"
            mounts = volumes_by_mount(spec, c)
            for path in (home, "/tmp"):
                assert "emptyDir" in mounts[path] and mounts[path]["emptyDir"]["sizeLimit"], path
            if "XDG_CACHE_HOME" in env:
                assert env["XDG_CACHE_HOME"].startswith(home + "/")


def documented_commands(prefix: str) -> list[list[str]]:
    return [
        shlex.split(line.strip())
        for line in OPERATIONS.read_text().splitlines()
        if line.strip().startswith(prefix)
    ]


def created_secrets() -> dict[tuple[str, str], list[str]]:
    """(namespace, name) → arguments, from the `kubectl create secret` lines of the docs."""
    created = {}
    for words in documented_commands("kubectl create secret"):
        name = words[4]
        namespace = words[words.index("-n") + 1]
        created[(namespace, name)] = words
    return created


def referenced_secrets(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    found = set()
    for owner in owners(objects):
        ns = owner["metadata"]["namespace"]
        spec = owner["spec"]["template"]["spec"]
        for c in spec["containers"]:
            found |= {(ns, s["secretRef"]["name"]) for s in c.get("envFrom", []) if "secretRef" in s}
            found |= {
                (ns, e["valueFrom"]["secretKeyRef"]["name"])
                for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})
            }  # fmt: skip
        for v in spec.get("volumes", []):
            if "secret" in v:
                found.add((ns, v["secret"]["secretName"]))
            for source in v.get("projected", {}).get("sources", []):
                if "secret" in source:
                    found.add((ns, source["secret"]["name"]))
    return found


def test_every_secret_production_pods_use_is_one_the_docs_create(production: list[dict[str, Any]]) -> None:
    """Production renders no Secret: each one a pod names, in its namespace, has its
    `kubectl create secret` line in docs/operations.md, and the docs create none that no pod
    reads."""
    assert not [o for o in production if o["kind"] == "Secret"]
    referenced = referenced_secrets(production)
    assert {name for _, name in referenced} >= {"tempi-model-keys", "tempi-temporal", "tempi-temporal-tls"}
    assert referenced == set(created_secrets())


def test_the_documented_tls_settings_name_the_mounted_files_and_tempi_reads_them(
    production: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Every pod that connects to Temporal mounts tempi-temporal-tls where the documented
    TEMPORAL_TLS_*_PATH settings point, at the file names the documented command gives;
    with those settings, tempi's own connection code loads the client pair and CA."""
    settings = dict(
        line.strip().split("=", 1)
        for line in OPERATIONS.read_text().splitlines()
        if re.match(r"\s*TEMPORAL_TLS_\w+_PATH=", line)
    )
    assert set(settings) == {
        "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
    }  # fmt: skip
    mount_dirs = {str(Path(p).parent) for p in settings.values()}
    [mount_dir] = mount_dirs
    for (ns, name), words in created_secrets().items():
        if name == "tempi-temporal-tls":
            keys = {w.split("=")[1] for w in words if w.startswith("--from-file=")}
            assert keys == {Path(p).name for p in settings.values()}, ns
    for owner in owners(production):
        spec = owner["spec"]["template"]["spec"]
        for c in spec["containers"]:
            if connects_to_temporal(c):
                mounted = volumes_by_mount(spec, c)[mount_dir]
                assert mounted["secret"] == {
                    "secretName": "tempi-temporal-tls",
                    "optional": True,
                    "defaultMode": 0o440,
                }
                refs = [s["secretRef"] for s in c["envFrom"] if "secretRef" in s]
                assert {"name": "tempi-temporal", "optional": True} in refs
    files = {"tls.crt": b"client certificate", "tls.key": b"client key", "ca.crt": b"server ca"}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    env = {k: v.replace(mount_dir, str(tmp_path)) for k, v in settings.items()}
    tls = load_settings({"TEMPORAL_ADDRESS": "temporal.example.com:7233", **env}).tls
    assert not isinstance(tls, bool)
    assert (tls.client_cert, tls.client_private_key, tls.server_root_ca_cert) == tuple(files.values())


SECRET_NAME = re.compile(r"(KEY|TOKEN|PASSWORD|SECRET|_DATA)$")


def test_no_secret_value_is_in_a_tracked_file() -> None:
    """No manifest holds a Secret, stringData or a secret-looking variable with a value, and
    the dev overlay's example env files are empty."""
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict):
                continue
            assert doc.get("kind") != "Secret", path
            for env in _all_env(doc):
                if SECRET_NAME.search(env["name"]):
                    assert "value" not in env, f"{path.name}: {env['name']} has a value"
    for example in (K8S / "overlays").rglob("*.env"):
        assert example.name.endswith(".example.env"), example
        for line in example.read_text().splitlines():
            if line and not line.startswith("#"):
                assert line.endswith("="), f"{example.name}: {line.split('=')[0]} has a value"


def _all_env(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [e for e in node.get("env", []) if isinstance(e, dict) and "name" in e]
        return found + [e for v in node.values() for e in _all_env(v)]
    if isinstance(node, list):
        return [e for v in node for e in _all_env(v)]
    return []


def test_each_build_scales_on_its_own_backlog_of_tempis_queue(production: list[dict[str, Any]]) -> None:
    """The ScaledObject targets the build's Deployment in its namespace, asks about tempi's
    task queue and the build's Worker Deployment version, reads every *FromEnv from the
    worker's own environment, and gives KEDA strings (it rejects numbers in metadata)."""
    scaled = [o for o in production if o["kind"] == "ScaledObject"]
    workers = [o for o in owners(production) if o["metadata"]["name"].startswith("tempi-worker")]
    assert len(scaled) == len(workers) == 1
    [so], [deployment] = scaled, workers
    assert so["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert so["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert "replicas" not in deployment["spec"], "KEDA owns the count; apply would reset it"
    assert 1 <= so["spec"]["minReplicaCount"] < so["spec"]["maxReplicaCount"]
    [trigger] = so["spec"]["triggers"]
    assert trigger["type"] == "temporal"
    metadata = trigger["metadata"]
    assert all(isinstance(v, str) for v in metadata.values()), metadata
    assert {k.removesuffix("FromEnv") for k in metadata} <= KEDA_TEMPORAL_FIELDS
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {**config(production, deployment["metadata"]["namespace"])}
    resolved = {k.removesuffix("FromEnv"): env[v] for k, v in metadata.items() if k.endswith("FromEnv")}
    values = {**{k: v for k, v in metadata.items() if not k.endswith("FromEnv")}, **resolved}
    assert values["endpoint"] == env["TEMPORAL_ADDRESS"] and values["namespace"] == env["TEMPORAL_NAMESPACE"]
    assert values["taskQueue"] == DEFAULT_TASK_QUEUE
    assert set(values["queueTypes"].split(",")) == {"workflow", "activity"}
    assert values["workerDeploymentName"] == env["TEMPI_DEPLOYMENT_NAME"]
    assert (
        values["workerDeploymentBuildId"]
        == deployment["spec"]["template"]["metadata"]["labels"]["tempi.dev/build-id"]
    )
    assert any(s.get("configMapRef", {}).get("name") == "tempi-config" for s in container["envFrom"])


def test_the_service_monitor_scrapes_every_worker_pod_on_the_metrics_port(
    production: list[dict[str, Any]],
) -> None:
    for ns in {o["metadata"]["namespace"] for o in owners(production)}:
        pods = [
            o["spec"]["template"] for o in owners(production)
            if o["metadata"]["namespace"] == ns and o["spec"]["template"]["metadata"]["labels"].get("tempi.dev/role") == "worker"
        ]  # fmt: skip
        if not pods:
            continue
        [monitor] = [
            o for o in production if o["kind"] == "ServiceMonitor" and o["metadata"]["namespace"] == ns
        ]
        [service] = [
            o for o in production
            if o["kind"] == "Service" and o["metadata"]["namespace"] == ns
            and monitor["spec"]["selector"]["matchLabels"].items() <= o["metadata"]["labels"].items()
        ]  # fmt: skip
        metrics_port = int(config(production, ns)["TEMPI_METRICS_ADDRESS"].rsplit(":", 1)[1])
        [endpoint] = monitor["spec"]["endpoints"]
        [port] = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
        assert service["spec"].get("clusterIP") == "None", "scrape each pod, not one behind a virtual IP"
        for pod in pods:
            assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
            [named] = [p for p in pod["spec"]["containers"][0]["ports"] if p["name"] == port["targetPort"]]
            assert named["containerPort"] == metrics_port
        ingress = [
            p for o in production
            if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == ns and "Ingress" in o["spec"]["policyTypes"]
            and o["spec"]["podSelector"].get("matchLabels", {}).items() <= pods[0]["metadata"]["labels"].items()
            for rule in o["spec"].get("ingress", []) for p in rule.get("ports", [])
        ]  # fmt: skip
        assert {"protocol": "TCP", "port": metrics_port} in ingress, ns


def test_replicated_workloads_spread_over_zones_and_nodes(rendered: list[dict[str, Any]]) -> None:
    for owner in owners(rendered):
        if owner["kind"] != "Deployment" or owner["spec"].get("replicas") == 1:
            continue
        labels = owner["spec"]["template"]["metadata"]["labels"]
        constraints = owner["spec"]["template"]["spec"].get("topologySpreadConstraints", [])
        keys = {c["topologyKey"] for c in constraints}
        assert keys == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}, owner["metadata"]["name"]
        for c in constraints:
            assert c["labelSelector"]["matchLabels"].items() <= labels.items()
            assert set(c.get("matchLabelKeys", [])) <= set(labels)


def test_the_slack_gateways_probe_asks_about_the_gateways_own_queue(rendered: list[dict[str, Any]]) -> None:
    slack = find(rendered, "Deployment", "tempi-slack")
    [container] = slack["spec"]["template"]["spec"]["containers"]
    queue = slack_task_queue(container["args"][1])
    for probe in ("startupProbe", "livenessProbe"):
        command = container[probe]["exec"]["command"]
        assert command[:3] == ["python", "-m", "tempi.workers.healthcheck"]
        assert command[command.index("--task-queue") + 1] == queue


def test_the_helm_values_pin_the_server_the_bundled_cli_runs() -> None:
    """The Helm values pin the Temporal server release tempi is tested on: the dev server of
    the `temporal` CLI tempi locks (`temporal --version` names it). Compose's production
    stack stays on an older server image and so turns worker versioning off (docs/operations.md,
    "Images and Docker Compose")."""
    temporal = Path(sys.executable).parent / "temporal"
    version = subprocess.run([str(temporal), "--version"], capture_output=True, text=True, timeout=60).stdout
    server = re.search(r"Server (\d+\.\d+\.\d+)", version)
    assert server, version
    values = yaml.safe_load((K8S / "temporal-helm-values.yaml").read_text())
    assert values["server"]["image"]["tag"] == server.group(1)
    compose = (ROOT / "deploy" / "compose" / "tempi.yaml").read_text()
    assert "TEMPI_DEPLOYMENT_NAME" not in compose


def _selects(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    return policy["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()


def test_the_web_console_serves_in_the_cluster_with_its_token_from_a_secret(
    rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    """`tempi web` in the app namespace: bound to the pod's address on a ClusterIP Service,
    probed on its port (every path needs the token), its token a file of the tempi-web
    Secret that tempi reads, the session files writable (a fork writes one) and projects
    read only, reached on its port from the Ingress controller, and out to Temporal."""
    [deployment] = [o for o in owners(rendered) if o["metadata"]["name"] == "tempi-web"]
    ns = deployment["metadata"]["namespace"]
    # The app namespace (`restricted`), beside the main-queue workers.
    assert (
        ns
        == next(o for o in owners(rendered) if o["metadata"]["name"].startswith("tempi-worker"))["metadata"][
            "namespace"
        ]
    )
    spec = deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    [c] = spec["containers"]
    assert c["args"] == ["web", "--host", "0.0.0.0", "--port", "8377"]
    assert connects_to_temporal(c)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["tcpSocket"]["port"] == "http", probe
    assert c["ports"] == [{"name": "http", "containerPort": 8377}]

    service = find(rendered, "Service", "tempi-web", ns)
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "http", "port": 8377, "targetPort": "http"}]

    # The token: a file of the (required) tempi-web Secret, never a value in the manifest.
    env = {**config(rendered, ns), **{e["name"]: e.get("value") for e in c.get("env", [])}}
    assert "TEMPI_WEB_TOKEN" not in env
    token_file = Path(env["TEMPI_WEB_TOKEN_FILE"])
    mounts = volumes_by_mount(spec, c)
    sources = mounts[str(token_file.parent)]["projected"]["sources"]
    assert {"secret": {"name": "tempi-web"}} in sources
    assert str(token_file.parent) == env["TEMPI_SECRETS_DIR"]
    # tempi reads the file the Secret's key becomes, and refuses to start when it is missing.
    mounted = tmp_path / token_file.name
    mounted.write_text("t" * 44 + "\n")
    assert operator_token({"TEMPI_WEB_TOKEN_FILE": str(mounted)}) == "t" * 44
    with pytest.raises(ConfigError, match="TEMPI_WEB_TOKEN_FILE"):
        operator_token({"TEMPI_WEB_TOKEN_FILE": str(tmp_path / "absent")})

    read_only = {m["mountPath"]: m.get("readOnly", False) for m in c["volumeMounts"]}
    assert mounts[env["TEMPI_HOME"]]["persistentVolumeClaim"]["claimName"] == "tempi-sessions"
    assert read_only[env["TEMPI_HOME"]] is False
    assert mounts["/srv/projects"]["persistentVolumeClaim"]["claimName"] == "tempi-projects"
    assert read_only["/srv/projects"] is True

    policies = [o for o in rendered if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == ns]
    ingress = [
        rule
        for p in policies
        if "Ingress" in p["spec"]["policyTypes"] and _selects(p, labels)
        for rule in p["spec"].get("ingress", [])
    ]
    assert ingress and all(r["ports"] == [{"protocol": "TCP", "port": 8377}] for r in ingress)
    temporal_port = int(env["TEMPORAL_ADDRESS"].rsplit(":", 1)[1])
    egress = [
        rule
        for p in policies
        if "Egress" in p["spec"]["policyTypes"] and _selects(p, labels)
        for rule in p["spec"]["egress"]
    ]
    assert any({"protocol": "TCP", "port": temporal_port} in r.get("ports", []) for r in egress)
