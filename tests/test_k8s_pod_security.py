"""Every workload in deploy/k8s is admitted by the Pod Security level its namespace enforces
(the Pod Security Standards, checked by tests/pod_security_standards.py as the admission
controller checks them), and everything but the sandbox host meets `restricted`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.k8s_render import K8S, OVERLAYS, pod_owners, render
from tests.pod_security_standards import highest_level, violations

PSA = "pod-security.kubernetes.io/"


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(K8S / "overlays" / request.param)


def namespaces(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {
        o["metadata"]["name"]: o["metadata"].get("labels", {}) for o in objects if o["kind"] == "Namespace"
    }


def test_every_workload_is_admitted_by_its_namespace(rendered: list[dict[str, Any]]) -> None:
    """What `kubectl apply` would meet on a cluster: a pod template its namespace's
    `enforce` level refuses never starts (the DaemonSet stays at 0 pods, with a
    FailedCreate event)."""
    levels = namespaces(rendered)
    refused = []
    for owner in pod_owners(rendered):
        ns = owner["metadata"].get("namespace")
        assert ns in levels, (
            f"{owner['kind']}/{owner['metadata']['name']} is in {ns!r}, which no Namespace here labels"
        )
        level = levels[ns].get(PSA + "enforce")
        assert level, f"namespace {ns} enforces no Pod Security level"
        template = owner["spec"]["template"]
        for problem in violations(level, template["metadata"], template["spec"]):
            refused.append(f"{owner['kind']}/{owner['metadata']['name']} in {ns} ({level}): {problem}")
    assert not refused, "\n".join(refused)


def test_only_the_sandbox_host_leaves_restricted(rendered: list[dict[str, Any]]) -> None:
    """The Docker socket (a hostPath) is the one exception, in a namespace of its own that
    holds nothing else; every other workload meets `restricted` in a namespace enforcing it,
    and every namespace audits and warns at a level at least as strict as it enforces."""
    levels = namespaces(rendered)
    order = ["privileged", "baseline", "restricted"]
    for ns, labels in levels.items():
        enforce = labels[PSA + "enforce"]
        for mode in ("audit", "warn"):
            assert order.index(labels[PSA + mode]) >= order.index(enforce), f"{ns}: {mode}"
    for owner in pod_owners(rendered):
        name, ns = owner["metadata"]["name"], owner["metadata"]["namespace"]
        template = owner["spec"]["template"]
        if name.startswith("tempi-sandbox-host"):
            assert levels[ns][PSA + "enforce"] == "privileged", name
            assert highest_level(template["metadata"], template["spec"]) == "privileged", name
            others = [o["metadata"]["name"] for o in pod_owners(rendered) if o["metadata"]["namespace"] == ns]
            assert others == [name], f"{ns} admits privileged pods: it must hold only the sandbox host"
        else:
            assert levels[ns][PSA + "enforce"] == "restricted", f"{name} is in {ns}"
            assert highest_level(template["metadata"], template["spec"]) == "restricted", name


RESTRICTED_POD: dict[str, Any] = {
    "securityContext": {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    },
    "containers": [
        {
            "name": "c",
            "image": "x",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
    ],
    "volumes": [{"name": "tmp", "emptyDir": {}}],
}


def changed(path: str, value: Any) -> dict[str, Any]:
    spec = copy.deepcopy(RESTRICTED_POD)
    *parents, last = path.split(".")
    node: Any = spec
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    if isinstance(node, list):
        node.append(value)
    else:
        node[last] = value
    return spec


@pytest.mark.parametrize(
    ("path", "value", "level"),
    [
        ("volumes.-", {"name": "sock", "hostPath": {"path": "/var/run/docker.sock"}}, "privileged"),
        ("hostNetwork", True, "privileged"),
        ("hostPID", True, "privileged"),
        ("containers.0.securityContext.privileged", True, "privileged"),
        ("containers.0.securityContext.capabilities.add", ["SYS_ADMIN"], "privileged"),
        ("containers.0.ports", [{"containerPort": 80, "hostPort": 80}], "privileged"),
        ("securityContext.seccompProfile", {"type": "Unconfined"}, "privileged"),
        ("securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}], "privileged"),
        ("volumes.-", {"name": "share", "nfs": {"server": "n", "path": "/"}}, "baseline"),
        ("containers.0.securityContext.allowPrivilegeEscalation", True, "baseline"),
        ("securityContext.runAsNonRoot", False, "baseline"),
        ("securityContext.runAsUser", 0, "baseline"),
        ("securityContext.seccompProfile", {}, "baseline"),
        ("containers.0.securityContext.capabilities.drop", [], "baseline"),
        ("containers.0.securityContext.capabilities.add", ["CHOWN"], "baseline"),
        ("containers.0.securityContext.capabilities.add", ["NET_BIND_SERVICE"], "restricted"),
        ("securityContext.sysctls", [{"name": "net.ipv4.tcp_syncookies", "value": "1"}], "restricted"),
    ],
)
def test_the_checker_places_a_pod_at_the_published_level(path: str, value: Any, level: str) -> None:
    """The checker itself, on one change at a time to a pod that meets `restricted`: each
    lands at the level the published standard gives it."""
    assert highest_level({}, RESTRICTED_POD) == "restricted"
    assert highest_level({}, changed(path, value)) == level
