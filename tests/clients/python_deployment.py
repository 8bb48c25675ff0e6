"""The official Kubernetes Python client against `koord --role=all --embedded`: creates a
Deployment and watches its pods until they run.

Usage: python_deployment.py KUBECONFIG
"""

import sys
import time

from kubernetes import client, config, watch

NS = "pyclient"
REPLICAS = 2


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


def main():
    config.load_kube_config(sys.argv[1])
    core, apps = client.CoreV1Api(), client.AppsV1Api()
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    body = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=REPLICAS,
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx:1.27")]),
            ),
        ),
    )
    created = apps.create_namespaced_deployment(NS, body)
    check(created.metadata.uid, "Deployment created")

    running = set()
    w = watch.Watch()
    for ev in w.stream(core.list_namespaced_pod, NS, label_selector="app=web", timeout_seconds=90):
        pod = ev["object"]
        if ev["type"] != "DELETED" and pod.status and pod.status.phase == "Running":
            running.add(pod.metadata.name)
        if len(running) >= REPLICAS:
            w.stop()
    check(len(running) == REPLICAS, f"{REPLICAS} pods of the Deployment Running")

    ready = 0
    for _ in range(60):
        ready = apps.read_namespaced_deployment(name="web", namespace=NS).status.ready_replicas or 0
        if ready >= REPLICAS:
            break
        time.sleep(0.5)
    check(ready == REPLICAS, "Deployment status readyReplicas")

    pods = core.list_namespaced_pod(NS, label_selector="app=web").items
    owner = (pods[0].metadata.owner_references or [None])[0] if pods else None
    check(owner is not None and owner.kind == "ReplicaSet" and owner.controller, "pods owned by a ReplicaSet")
    print("all checks passed")


if __name__ == "__main__":
    main()
