"""The Kubernetes Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards),
checked on a pod spec the way the built-in Pod Security admission checks it, so a manifest
test can say which level a workload meets without a cluster.

`violations(level, meta, spec)` lists what keeps a pod template from a level: "privileged"
has no controls, "baseline" its controls, "restricted" baseline's and its own. Each entry
names the control and the field, as the admission's rejection message does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

LEVELS = ("privileged", "baseline", "restricted")

# Capabilities baseline lets a container add (the container runtimes' default set).
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
# The only volume sources restricted admits; every other one (hostPath, nfs, iscsi...) is
# storage a pod reaches without a PersistentVolume an administrator made.
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def containers(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in CONTAINER_LISTS:
        for c in spec.get(kind) or []:
            yield f"{kind}[{c.get('name')}]", c


def violations(level: str, meta: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}: one of {', '.join(LEVELS)}")
    if level == "privileged":
        return []
    found = list(_baseline(meta, spec))
    if level == "restricted":
        found += _restricted(spec)
    return found


def highest_level(meta: dict[str, Any], spec: dict[str, Any]) -> str:
    """The strictest level the pod meets."""
    return next(level for level in reversed(LEVELS) if not violations(level, meta, spec))


def _baseline(meta: dict[str, Any], spec: dict[str, Any]) -> Iterator[str]:
    pod_sc = spec.get("securityContext") or {}
    annotations = (meta or {}).get("annotations") or {}
    contexts = [("spec.securityContext", pod_sc)] + [
        (f"{where}.securityContext", c.get("securityContext") or {}) for where, c in containers(spec)
    ]
    for where, sc in contexts:
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            yield f"HostProcess: {where}.windowsOptions.hostProcess"
        if sc.get("privileged") and where != "spec.securityContext":
            yield f"Privileged Containers: {where}.privileged"
        selinux = sc.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            yield f"SELinux: {where}.seLinuxOptions"
        if sc.get("procMount", "Default") != "Default":
            yield f"/proc Mount Type: {where}.procMount"
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            yield f"Seccomp: {where}.seccompProfile.type Unconfined"
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            yield f"AppArmor: {where}.appArmorProfile.type"
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            yield f"Host Namespaces: spec.{field}"
    for where, c in containers(spec):
        added = set(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPABILITIES:
            yield f"Capabilities: {where} adds {sorted(added - BASELINE_CAPABILITIES)}"
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                yield f"Host Ports: {where} hostPort {port['hostPort']}"
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            yield f"HostPath Volumes: spec.volumes[{volume['name']}].hostPath"
    for sysctl in pod_sc.get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            yield f"Sysctls: {sysctl['name']}"
    for key, value in annotations.items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            yield f"AppArmor: annotation {key}={value}"


def _restricted(spec: dict[str, Any]) -> list[str]:
    found = []
    pod_sc = spec.get("securityContext") or {}
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(
                f"Volume Types: spec.volumes[{volume['name']}] is {sorted(kinds - RESTRICTED_VOLUMES)}"
            )
    pod_non_root = pod_sc.get("runAsNonRoot") is True
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost")
    if pod_sc.get("runAsUser") == 0:
        found.append("Running as Non-root user: spec.securityContext.runAsUser 0")
    for where, c in containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(
                f"Privilege Escalation: {where}.securityContext.allowPrivilegeEscalation must be false"
            )
        non_root = sc.get("runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            found.append(f"Running as Non-root: {where} needs runAsNonRoot true (pod or container)")
        if sc.get("runAsUser") == 0:
            found.append(f"Running as Non-root user: {where}.securityContext.runAsUser 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost") and not (seccomp is None and pod_seccomp):
            found.append(
                f"Seccomp: {where} needs seccompProfile RuntimeDefault or Localhost (pod or container)"
            )
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"Capabilities: {where} must drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(f"Capabilities: {where} may add only NET_BIND_SERVICE")
    return found
