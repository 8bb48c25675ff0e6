// The official Kubernetes JavaScript client (@kubernetes/client-node) against
// `koord --role=all --embedded`: creates a Deployment and watches its pods until they run.
//
// Usage: node js_deployment.mjs KUBECONFIG   (NODE_PATH names the client's node_modules)
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const k8s = require("@kubernetes/client-node");

const NS = "jsclient";
const REPLICAS = 2;

function check(cond, what) {
  if (!cond) {
    console.error(`FAILED: ${what}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const core = kc.makeApiClient(k8s.CoreV1Api);
const apps = kc.makeApiClient(k8s.AppsV1Api);

await core.createNamespace({ body: { metadata: { name: NS } } });
const created = await apps.createNamespacedDeployment({
  namespace: NS,
  body: {
    metadata: { name: "web" },
    spec: {
      replicas: REPLICAS,
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" } },
        spec: { containers: [{ name: "web", image: "nginx:1.27" }] },
      },
    },
  },
});
check(created.metadata.uid, "Deployment created");

// Watch the pods until REPLICAS of them run (the watch starts from a fresh list).
const running = new Set();
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`only ${running.size} pods running after 90 s`)), 90000);
  const watch = new k8s.Watch(kc);
  watch
    .watch(
      `/api/v1/namespaces/${NS}/pods`,
      { labelSelector: "app=web" },
      (type, pod) => {
        if (pod.status?.phase === "Running" && type !== "DELETED") running.add(pod.metadata.name);
        if (running.size >= REPLICAS) {
          clearTimeout(timer);
          resolve();
        }
      },
      (err) => {
        if (err && running.size < REPLICAS) reject(err);
      },
    )
    .then((req) => setTimeout(() => req.abort(), 90000).unref())
    .catch(reject);
});
check(running.size === REPLICAS, `${REPLICAS} pods of the Deployment Running`);

// The Deployment's status says so too (the controller writes it).
let ready = 0;
for (let i = 0; i < 60 && ready < REPLICAS; i++) {
  const d = await apps.readNamespacedDeployment({ name: "web", namespace: NS });
  ready = d.status?.readyReplicas ?? 0;
  if (ready < REPLICAS) await new Promise((r) => setTimeout(r, 500));
}
check(ready === REPLICAS, "Deployment status readyReplicas");

const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: "app=web" });
const owner = pods.items[0]?.metadata?.ownerReferences?.[0];
check(owner?.kind === "ReplicaSet" && owner?.controller === true, "pods owned by a ReplicaSet");
console.log("all checks passed");
process.exit(0);
