"""The test bed's volume provisioner: a PersistentVolume for every claim of its StorageClass.

Test-bed code, not product code. A cluster's CSI driver does this job; simulated nodes have no
disks, so this one writes PVs with a `hostPath` nobody mounts. It works like an external
provisioner: kube-controller-manager's PV binder marks a claim of the class with
`volume.kubernetes.io/storage-provisioner`, this process creates a PV pre-bound to the claim
(`claimRef` with the claim's uid), the binder completes the binding; when the claim is deleted
the binder marks the PV Released and this process deletes it (reclaim policy Delete).

    provisioner.py --kubeconfig K [--class gpu-portal-local]

`install` writes the StorageClass (the cluster's default) and exits.
"""

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from k8s_adapters.client import Cluster  # noqa: E402
from k8s_adapters.errors import K8sError  # noqa: E402

PROVISIONER = "gpu-portal.test/local"
PROVISIONER_ANNOTATIONS = (
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)
log = logging.getLogger("provisioner")


def build_storage_class(name):
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": name,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    }


def wants_volume(claim):
    meta, spec = claim["metadata"], claim.get("spec") or {}
    annotations = meta.get("annotations") or {}
    return (
        (claim.get("status") or {}).get("phase") == "Pending"
        and not spec.get("volumeName")
        and not meta.get("deletionTimestamp")
        and any(annotations.get(a) == PROVISIONER for a in PROVISIONER_ANNOTATIONS)
    )


def build_volume(claim):
    meta, spec = claim["metadata"], claim["spec"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": spec.get("storageClassName") or "",
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "hostPath": {"path": f"/var/lib/simulated-volumes/{meta['uid']}"},
        },
    }


def provision(cluster, claim):
    if not wants_volume(claim):
        return
    volume = build_volume(claim)
    if not cluster.get("v1", "PersistentVolume", volume["metadata"]["name"]):
        cluster.apply_one(volume)
        log.info("provisioned %s/%s", claim["metadata"]["namespace"], claim["metadata"]["name"])


def reclaim(cluster):
    for volume in cluster.list("v1", "PersistentVolume"):
        ours = (volume["metadata"].get("annotations") or {}).get("pv.kubernetes.io/provisioned-by")
        if ours == PROVISIONER and (volume.get("status") or {}).get("phase") == "Released":
            cluster.delete("v1", "PersistentVolume", volume["metadata"]["name"])


def run(cluster):
    """List, handle, watch for 10 s, reclaim; again. Errors back off and relist. Deleted claims
    release their volumes a moment later: those are reclaimed at most once a second (a list of
    every volume per deleted claim cost the API server most of a core when 200 went at once)."""
    backoff, reclaimed = 0.5, 0.0
    while True:
        try:
            claims, version = cluster.list_with_version("v1", "PersistentVolumeClaim")
            for claim in claims:
                provision(cluster, claim)
            reclaim(cluster)
            for kind, claim in cluster.watch(
                "v1", "PersistentVolumeClaim", resource_version=version, timeout=10
            ):
                if kind in ("ADDED", "MODIFIED"):
                    provision(cluster, claim)
                elif kind == "DELETED" and time.monotonic() - reclaimed > 1:
                    reclaim(cluster)
                    reclaimed = time.monotonic()
            backoff = 0.5
        except K8sError as exc:
            log.warning("%s; relisting in %.1fs", exc, backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, 10)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--class", dest="storage_class", default="gpu-portal-local")
    parser.add_argument("command", nargs="?", choices=["run", "install"], default="run")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cluster = Cluster.connect(args.kubeconfig, field_manager="gpu-portal-test-provisioner")
    cluster.apply_one(build_storage_class(args.storage_class))
    if args.command == "run":
        run(cluster)


if __name__ == "__main__":
    main()
