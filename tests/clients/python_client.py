"""A second client stack against koord's embedded API server: the official Kubernetes
Python client (JSON, watch, patch) and Google's protobuf runtime (protobuf bodies,
responses and watch frames), both from PyPI.

Usage: python_client.py KUBECONFIG DESCRIPTOR_SET
"""

import json
import struct
import sys
import threading

import urllib3
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from kubernetes import client, config, watch

NS = "pyclient"
PROTOBUF = "application/vnd.kubernetes.protobuf"


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


def messages(fds_path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(fds_path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file in fds.file:
        pool.Add(file)
    cls = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return {
        "ConfigMap": cls("api.core.v1.ConfigMap"),
        "ConfigMapList": cls("api.core.v1.ConfigMapList"),
        "Unknown": cls("apimachinery.pkg.runtime.Unknown"),
        "WatchEvent": cls("apimachinery.pkg.apis.meta.v1.WatchEvent"),
    }


class Raw:
    """Protobuf requests over urllib3, with the Python client's credentials and CA."""

    def __init__(self):
        c = client.Configuration.get_default_copy()
        self.host = c.host
        self.headers = {a["key"]: a["value"] for a in c.auth_settings().values()
                        if a.get("in") == "header" and a.get("value")}
        self.http = urllib3.PoolManager(ca_certs=c.ssl_ca_cert)

    def call(self, method, path, headers, body=None, stream=False):
        h = dict(self.headers, **headers)
        return self.http.request(method, self.host + path, headers=h, body=body,
                                 preload_content=not stream)


def envelope(m, api_version, kind, obj):
    u = m["Unknown"]()
    u.typeMeta.apiVersion = api_version
    u.typeMeta.kind = kind
    u.raw = obj.SerializeToString()
    return b"k8s\x00" + u.SerializeToString()


def open_envelope(m, kind, data):
    assert data[:4] == b"k8s\x00", data[:16]
    u = m["Unknown"]()
    u.ParseFromString(data[4:])
    obj = m[kind]()
    obj.ParseFromString(u.raw)
    return u.typeMeta.kind, obj


def json_watch_and_patch(core):
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    seen = []
    w = watch.Watch()
    started = threading.Event()

    def follow():
        started.set()
        for ev in w.stream(core.list_namespaced_config_map, NS, timeout_seconds=20):
            # As on a cluster, the namespace also holds kube-root-ca.crt.
            if ev["object"].metadata.name != "j":
                continue
            seen.append((ev["type"], ev["object"].metadata.name, dict(ev["object"].data or {})))
            if ev["type"] == "DELETED":
                w.stop()

    t = threading.Thread(target=follow)
    t.start()
    started.wait()
    import time

    time.sleep(0.5)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="j"), data={"a": "1"})
    core.create_namespaced_config_map(NS, body)
    core.patch_namespaced_config_map("j", NS, {"data": {"b": "2"}})
    got = core.read_namespaced_config_map("j", NS)
    check(got.data == {"a": "1", "b": "2"}, "strategic merge patch from the Python client")
    core.delete_namespaced_config_map("j", NS)
    t.join(timeout=25)
    types = [s[0] for s in seen]
    check(types == ["ADDED", "MODIFIED", "DELETED"], f"watch events in order: {types}")
    check(seen[1][2] == {"a": "1", "b": "2"}, "the MODIFIED event carries the patched data")


def protobuf_round_trip(api, m):
    cm = m["ConfigMap"]()
    cm.metadata.name = "p"
    cm.data["k"] = "v"
    body = envelope(m, "v1", "ConfigMap", cm)
    path = f"/api/v1/namespaces/{NS}/configmaps"
    hdrs = {"Content-Type": PROTOBUF, "Accept": PROTOBUF}
    resp = api.call("POST", path, hdrs, body)
    raw = resp.data
    check(resp.status == 201, f"protobuf create answered 201 ({resp.status}: {raw[:200]!r})")
    check(resp.headers.get("Content-Type", "").startswith(PROTOBUF), "answered in protobuf")
    kind, created = open_envelope(m, "ConfigMap", raw)
    check(kind == "ConfigMap" and created.data["k"] == "v", "created object decodes")
    check(created.metadata.uid != "" and created.metadata.creationTimestamp.seconds > 0,
          "server-set uid and creationTimestamp come back as protobuf fields")
    resp = api.call("GET", path, {"Accept": PROTOBUF})
    kind, lst = open_envelope(m, "ConfigMapList", resp.data)
    # As on a cluster, the namespace also holds kube-root-ca.crt.
    names = [i.metadata.name for i in lst.items]
    check(kind == "ConfigMapList" and names == ["kube-root-ca.crt", "p"], f"a protobuf list: {names}")
    return lst.metadata.resourceVersion


def protobuf_watch(api, core, m, rv):
    path = f"/api/v1/namespaces/{NS}/configmaps?watch=true&timeoutSeconds=5&resourceVersion={rv}"
    frames = []

    def read():
        r = api.call("GET", path, {"Accept": PROTOBUF}, stream=True)
        check(r.headers.get("Content-Type", "").startswith(PROTOBUF + ";stream=watch"),
              "protobuf watch content type")
        buf = b""
        for chunk in r.stream(1024):
            buf += chunk
            while len(buf) >= 4:
                (n,) = struct.unpack(">I", buf[:4])
                if len(buf) < 4 + n:
                    break
                ev = m["WatchEvent"]()
                ev.ParseFromString(buf[4:4 + n])
                buf = buf[4 + n:]
                _, obj = open_envelope(m, "ConfigMap", ev.object.raw)
                frames.append((ev.type, obj.metadata.name, dict(obj.data)))
                if ev.type == "DELETED":
                    return

    t = threading.Thread(target=read)
    t.start()
    import time

    time.sleep(0.5)
    core.patch_namespaced_config_map("p", NS, {"data": {"k": "w"}})
    core.delete_namespaced_config_map("p", NS)
    t.join(timeout=10)
    check([f[0] for f in frames] == ["MODIFIED", "DELETED"], f"protobuf watch frames: {frames}")
    check(frames[0][2] == {"k": "w"}, "the frame's object decodes with the new data")


def main():
    kubeconfig, fds = sys.argv[1], sys.argv[2]
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api(client.ApiClient())
    m = messages(fds)
    json_watch_and_patch(core)
    raw = Raw()
    rv = protobuf_round_trip(raw, m)
    protobuf_watch(raw, core, m, rv)
    core.delete_namespace(NS)
    print("all checks passed")


if __name__ == "__main__":
    main()
