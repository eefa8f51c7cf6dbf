"""The Kubernetes manifests in deploy/kubernetes: valid against the API schemas, and in step.

The schemas are the ones kubernetes-validate bundles, so this runs offline. Beyond the
schemas (which see ``mountPropagation`` as any string), the DaemonSet, the reader pod and
the ConfigMap must agree on the mountpoint, the host path and the reference file.
"""

from __future__ import annotations

import copy
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import refmount

ROOT = Path(__file__).parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
EXAMPLE_REFS = ROOT / "examples" / "air" / "refs.json"
VERSIONS = ("1.28", kubernetes_validate.latest_version())
"""The oldest Kubernetes release the manifests are meant for, and the newest one bundled."""

Manifest = dict[str, Any]


def load_all() -> list[tuple[str, Manifest]]:
    """Return ``(file name, document)`` for every document of every manifest file."""
    documents = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        with open(path) as file:
            documents += [(path.name, doc) for doc in yaml.safe_load_all(file) if doc]
    return documents


def the(kind: str) -> Manifest:
    """Return the one manifest of ``kind``."""
    found = [doc for _, doc in load_all() if doc["kind"] == kind]
    assert len(found) == 1, f"{len(found)} manifests of kind {kind}"
    return found[0]


def volume_mount(container: Manifest, volume: str) -> Manifest:
    mounts: list[Manifest] = [m for m in container["volumeMounts"] if m["name"] == volume]
    (mount,) = mounts
    return mount


def volume(pod_spec: Manifest, name: str) -> Manifest:
    volumes: list[Manifest] = [v for v in pod_spec["volumes"] if v["name"] == name]
    (found,) = volumes
    return found


def daemon_container() -> Manifest:
    containers: list[Manifest] = the("DaemonSet")["spec"]["template"]["spec"]["containers"]
    (container,) = containers
    return container


def daemon_mountpoint() -> str:
    (variable,) = [e for e in daemon_container()["env"] if e["name"] == "MOUNTPOINT"]
    value: str = variable["value"]
    return value


def test_every_kind_is_there() -> None:
    kinds = sorted(doc["kind"] for _, doc in load_all())
    assert kinds == ["ConfigMap", "DaemonSet", "Pod"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "document", load_all(), ids=[f"{name}:{doc['kind']}" for name, doc in load_all()]
)
def test_manifest_is_valid(document: tuple[str, Manifest], version: str) -> None:
    _, manifest = document
    kubernetes_validate.validate(manifest, version, strict=True)


def test_validation_catches_a_misspelt_field() -> None:
    daemonset = copy.deepcopy(the("DaemonSet"))
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    mount = volume_mount(container, "mounts")
    mount["mountPropogation"] = mount.pop("mountPropagation")
    with pytest.raises(kubernetes_validate.ValidationError, match="mountPropogation"):
        kubernetes_validate.validate(daemonset, VERSIONS[-1], strict=True)


def test_daemonset_mounts_under_a_bidirectional_host_path() -> None:
    spec = the("DaemonSet")["spec"]["template"]["spec"]
    container = daemon_container()
    assert container["securityContext"]["privileged"] is True
    mount = volume_mount(container, "mounts")
    assert mount["mountPropagation"] == "Bidirectional"
    assert daemon_mountpoint().startswith(mount["mountPath"].rstrip("/") + "/")
    assert volume(spec, "mounts")["hostPath"]["type"] == "DirectoryOrCreate"
    assert volume(spec, "fuse")["hostPath"] == {"path": "/dev/fuse", "type": "CharDevice"}
    assert volume_mount(container, "fuse")["mountPath"] == "/dev/fuse"


def test_daemonset_is_ready_from_the_mount_and_unmounts_before_stopping() -> None:
    container = daemon_container()
    mountpoint = daemon_mountpoint()
    assert container["readinessProbe"]["exec"]["command"] == ["refmount", "stats", mountpoint]
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop == ["fusermount3", "-u", "-z", mountpoint]


def test_daemonset_script_is_valid_shell_and_mounts_the_configmap() -> None:
    container = daemon_container()
    assert container["command"] == ["/bin/sh", "-c"]
    (script,) = container["args"]
    subprocess.run(["sh", "-n", "-c", script], check=True)
    last = shlex.split(script.strip().splitlines()[-1])
    assert last[:3] == ["exec", "refmount", "-f"]
    assert last[-1] == "$MOUNTPOINT"
    assert "allow_other" in last, "readers in other pods run as other users"
    refs = Path(last[-2])
    refs_mount = volume_mount(container, "refs")
    assert refs.parent == Path(refs_mount["mountPath"])
    spec = the("DaemonSet")["spec"]["template"]["spec"]
    configmap = the("ConfigMap")
    assert volume(spec, "refs")["configMap"]["name"] == configmap["metadata"]["name"]
    assert refs.name in configmap["data"]


def test_configmap_holds_the_example_set_with_a_remote_target() -> None:
    (text,) = the("ConfigMap")["data"].values()
    refs = json.loads(text)
    example = json.loads(EXAMPLE_REFS.read_text())
    target = refs["templates"]["u"]
    assert target.startswith("s3://")
    assert refs["refs"].keys() == example["refs"].keys()
    for key, value in example["refs"].items():
        expected = ["{{u}}", *value[1:]] if isinstance(value, list) else value
        assert refs["refs"][key] == expected, key


def test_reader_pod_sees_the_host_path_through_host_to_container() -> None:
    daemon_spec = the("DaemonSet")["spec"]["template"]["spec"]
    host_path = volume(daemon_spec, "mounts")["hostPath"]["path"]
    pod_spec = the("Pod")["spec"]
    (container,) = pod_spec["containers"]
    (mount,) = container["volumeMounts"]
    assert mount["mountPropagation"] == "HostToContainer"
    assert mount["readOnly"] is True
    assert volume(pod_spec, mount["name"])["hostPath"]["path"] == host_path
    assert container["securityContext"].get("privileged") is not True
    # the reader looks where the DaemonSet mounts, seen through its own volume
    daemon_mount_path = volume_mount(daemon_container(), "mounts")["mountPath"]
    relative = Path(daemon_mountpoint()).relative_to(daemon_mount_path)
    assert f'"{Path(mount["mountPath"]) / relative}"' in container["args"][0]


def test_pods_run_the_image_scripts_image_builds() -> None:
    (container,) = the("Pod")["spec"]["containers"]
    expected = f"localhost/refmount:{refmount.__version__}"
    assert daemon_container()["image"] == container["image"] == expected
