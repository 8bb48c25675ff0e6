//! Projected volumes, as the kubelet fills them: a pod's `projected` volumes become
//! directories under `<data-dir>/noderuntime/volumes/<pod-uid>/<volume>` holding a
//! ServiceAccount token bound to the pod (requested again when 80 % of its life has
//! passed), ConfigMap and Secret keys, and downward-API fields; every container that
//! mounts one sees it read-only at its `mountPath`, in a mount namespace of its own (the
//! API server's ServiceAccount admission adds such a volume at
//! `/var/run/secrets/kubernetes.io/serviceaccount` to every pod). Other volume types are
//! not mounted: containers share the host's filesystem.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, KeyToPath, Pod, ProjectedVolumeSource, Secret, ServiceAccount,
    ServiceAccountTokenProjection,
};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::os::files::{Sync, write_atomic};
use crate::os::mount::BindMount;

/// How often ConfigMap, Secret and downward-API files are brought up to date (the
/// kubelet's sync period).
const RESYNC: Duration = Duration::from_secs(60);
/// kube's default `defaultMode` of a projected volume: 0644.
const DEFAULT_MODE: u32 = 0o644;
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// Where mount points may be made when missing: `/run` is a tmpfs, gone at reboot, so
/// nothing is left on the host's disk.
const MAKEABLE: &[&str] = &["/run/", "/var/run/"];

struct Token {
    value: String,
    refresh_at: Instant,
}

/// One file of a volume: its path inside the volume, contents and mode.
type File = (String, Vec<u8>, u32);

/// The projected volumes of one pod.
pub struct PodVolumes {
    root: PathBuf,
    tokens: HashMap<String, Token>,
    synced: Option<Instant>,
}

fn projected(pod: &Pod) -> impl Iterator<Item = (&str, &ProjectedVolumeSource)> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    volumes
        .into_iter()
        .flatten()
        .filter_map(|v| v.projected.as_ref().map(|p| (v.name.as_str(), p)))
}

/// A path inside a volume: relative, without `..`.
fn inside(path: &str) -> Result<&str, String> {
    let p = Path::new(path);
    let plain = p.components().all(|c| matches!(c, Component::Normal(_)));
    if path.is_empty() || !plain {
        return Err(format!(
            "path {path:?} must be relative and may not contain '..'"
        ));
    }
    Ok(path)
}

fn mode_of(item: Option<i32>, default: u32) -> u32 {
    item.map_or(default, |m| (m as u32) & 0o777)
}

/// The files of keyed data (`items`, or every key), as the kubelet lays them out.
fn keyed(
    data: &HashMap<String, Vec<u8>>,
    items: Option<&Vec<KeyToPath>>,
    what: &str,
    mode: u32,
) -> Result<Vec<File>, String> {
    let Some(items) = items else {
        let mut all: Vec<File> = data
            .iter()
            .map(|(k, v)| (k.clone(), v.clone(), mode))
            .collect();
        all.sort();
        return Ok(all);
    };
    items
        .iter()
        .map(|i| match data.get(&i.key) {
            Some(v) => Ok((i.path.clone(), v.clone(), mode_of(i.mode, mode))),
            None => Err(format!("{what}: key {:?} not found", i.key)),
        })
        .collect()
}

/// `ns/name`; `None` when it is missing and `optional`.
async fn fetch<K>(
    client: &kube::Client,
    ns: &str,
    name: &str,
    optional: Option<bool>,
) -> Result<Option<K>, String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    match api.get_opt(name).await.map_err(|e| e.to_string())? {
        Some(found) => Ok(Some(found)),
        None if optional == Some(true) => Ok(None),
        None => Err(format!(
            "{} {name:?} not found",
            K::kind(&Default::default()).to_lowercase()
        )),
    }
}

/// [`keyed`] of data that may be absent (an optional source that is missing: no files).
fn keyed_opt(
    data: Option<HashMap<String, Vec<u8>>>,
    items: Option<&Vec<KeyToPath>>,
    what: &str,
    mode: u32,
) -> Result<Vec<File>, String> {
    data.map_or(Ok(Vec::new()), |d| keyed(&d, items, what, mode))
}

fn configmap_data(cm: &ConfigMap) -> HashMap<String, Vec<u8>> {
    let mut data: HashMap<String, Vec<u8>> = HashMap::new();
    for (k, v) in cm.data.iter().flatten() {
        data.insert(k.clone(), v.clone().into_bytes());
    }
    for (k, v) in cm.binary_data.iter().flatten() {
        data.insert(k.clone(), v.0.clone());
    }
    data
}

fn secret_data(s: &Secret) -> HashMap<String, Vec<u8>> {
    let mut data: HashMap<String, Vec<u8>> = HashMap::new();
    for (k, v) in s.data.iter().flatten() {
        data.insert(k.clone(), v.0.clone());
    }
    for (k, v) in s.string_data.iter().flatten() {
        data.insert(k.clone(), v.clone().into_bytes());
    }
    data
}

/// A downward-API field of the pod.
fn field(pod: &Pod, path: &str) -> Result<String, String> {
    let meta = &pod.metadata;
    let lines = |m: Option<&std::collections::BTreeMap<String, String>>| {
        let all = m.into_iter().flatten();
        all.map(|(k, v)| format!("{k}={}", json!(v)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => lines(meta.labels.as_ref()),
        "metadata.annotations" => lines(meta.annotations.as_ref()),
        other => {
            return Err(format!(
                "downward API field {other:?} is not supported by the embedded node runtime"
            ));
        }
    })
}

impl PodVolumes {
    pub fn new(root: PathBuf) -> PodVolumes {
        PodVolumes {
            root,
            tokens: HashMap::new(),
            synced: None,
        }
    }

    /// When the files are next due: the earliest token refresh or the resync; `None`
    /// before the first sync and for a pod without projected volumes.
    pub fn next_sync(&self, pod: &Pod) -> Option<Instant> {
        let synced = self.synced?;
        projected(pod).next()?;
        let tokens = self.tokens.values().map(|t| t.refresh_at);
        tokens.chain([synced + RESYNC]).min()
    }

    pub fn synced(&self) -> bool {
        self.synced.is_some()
    }

    /// Writes every projected volume of `pod` (each file replaced whole, so a reader never
    /// sees half a token); the first error names the volume.
    pub async fn sync(&mut self, client: &kube::Client, pod: &Pod) -> Result<(), String> {
        for (name, source) in projected(pod) {
            let files = self
                .files(client, pod, name, source)
                .await
                .map_err(|e| format!("MountVolume.SetUp failed for volume {name:?}: {e}"))?;
            crate::os::files::private_dir(&self.root).map_err(|e| e.to_string())?;
            let dir = self.root.join(name);
            for (path, bytes, mode) in files {
                let file = dir.join(inside(&path)?);
                if let Some(parent) = file.parent() {
                    readable_dirs(&dir, parent).map_err(|e| format!("{name}: {e}"))?;
                }
                write_atomic(&file, &bytes, mode, Sync::Cached)
                    .map_err(|e| format!("{name}: {e}"))?;
            }
        }
        self.synced = Some(Instant::now());
        Ok(())
    }

    async fn files(
        &mut self,
        client: &kube::Client,
        pod: &Pod,
        volume: &str,
        source: &ProjectedVolumeSource,
    ) -> Result<Vec<File>, String> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let mode = mode_of(source.default_mode, DEFAULT_MODE);
        let mut out = Vec::new();
        for s in source.sources.iter().flatten() {
            if let Some(t) = &s.service_account_token {
                let key = format!("{volume}/{}", t.path);
                let token = self.token(client, pod, &key, t).await?;
                out.push((t.path.clone(), token.into_bytes(), mode));
            }
            if let Some(c) = &s.config_map {
                let found = fetch::<ConfigMap>(client, &ns, &c.name, c.optional).await?;
                let data = found.as_ref().map(configmap_data);
                let what = format!("configmap {:?}", c.name);
                out.extend(keyed_opt(data, c.items.as_ref(), &what, mode)?);
            }
            if let Some(c) = &s.secret {
                let found = fetch::<Secret>(client, &ns, &c.name, c.optional).await?;
                let data = found.as_ref().map(secret_data);
                let what = format!("secret {:?}", c.name);
                out.extend(keyed_opt(data, c.items.as_ref(), &what, mode)?);
            }
            for item in s.downward_api.iter().flat_map(|d| d.items.iter().flatten()) {
                let Some(f) = &item.field_ref else {
                    return Err(format!(
                        "downward API item {:?}: only fieldRef is supported by the embedded node runtime",
                        item.path
                    ));
                };
                let value = field(pod, &f.field_path)?;
                out.push((
                    item.path.clone(),
                    value.into_bytes(),
                    mode_of(item.mode, mode),
                ));
            }
        }
        Ok(out)
    }

    /// The token at `key`, requested anew (bound to the pod) once 80 % of its life passed.
    async fn token(
        &mut self,
        client: &kube::Client,
        pod: &Pod,
        key: &str,
        t: &ServiceAccountTokenProjection,
    ) -> Result<String, String> {
        if let Some(kept) = self.tokens.get(key)
            && Instant::now() < kept.refresh_at
        {
            return Ok(kept.value.clone());
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let sa = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".into());
        let seconds = t.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS);
        let mut spec = json!({"expirationSeconds": seconds, "boundObjectRef": {"apiVersion": "v1",
            "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid}});
        if let Some(aud) = t.audience.as_ref().filter(|a| !a.is_empty()) {
            spec["audiences"] = json!([aud]);
        }
        let body =
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
        let answer: Value = api
            .create_subresource("token", &sa, &PostParams::default(), &body)
            .await
            .map_err(|e| format!("requesting a token of serviceaccount {ns}/{sa}: {e}"))?;
        let value = answer
            .pointer("/status/token")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                format!("the token request of serviceaccount {ns}/{sa} returned no token")
            })?
            .to_string();
        let life = Duration::from_secs(seconds.max(1) as u64);
        self.tokens.insert(
            key.to_string(),
            Token {
                value: value.clone(),
                refresh_at: Instant::now() + life.mul_f64(0.8),
            },
        );
        Ok(value)
    }

    /// The bind mounts of `container`: each of its mounts of a projected volume, with the
    /// mount point made ready.
    pub fn mounts(&self, pod: &Pod, container: &Container) -> Result<Vec<BindMount>, String> {
        let names: Vec<&str> = projected(pod).map(|(n, _)| n).collect();
        let mut out = Vec::new();
        for m in container.volume_mounts.iter().flatten() {
            if !names.contains(&m.name.as_str()) {
                continue;
            }
            if m.sub_path.as_ref().is_some_and(|s| !s.is_empty()) {
                return Err(format!(
                    "volume mount {:?}: subPath of a projected volume is not supported by the embedded node runtime",
                    m.name
                ));
            }
            let target = Path::new(&m.mount_path);
            mount_point(target)?;
            let bind = BindMount::new(&self.root.join(&m.name), target)
                .map_err(|e| format!("volume mount {:?}: {e}", m.name))?;
            out.push(bind);
        }
        Ok(out)
    }

    /// Removes the pod's volume files (its containers are gone).
    pub fn remove(&self) {
        if let Err(e) = std::fs::remove_dir_all(&self.root)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.root.display(), error = %e, "removing projected volumes");
        }
    }
}

/// Makes `dir` (the volume, private parents above it being no obstacle through the bind
/// mount) and the directories from it down to `to`, 0755 whatever the umask, so a
/// container of any user reads its files.
fn readable_dirs(dir: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(to)?;
    for d in to.ancestors().take_while(|d| d.starts_with(dir)) {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// An existing directory, or one made under `/run`.
fn mount_point(target: &Path) -> Result<(), String> {
    if target.is_dir() {
        return Ok(());
    }
    let text = target.to_string_lossy();
    let plain = target.is_absolute()
        && target
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if plain && MAKEABLE.iter().any(|p| text.starts_with(p)) {
        return std::fs::create_dir_all(target).map_err(|e| format!("mount point {text}: {e}"));
    }
    Err(format!(
        "mount point {text} is not a directory on the host: containers of the embedded node runtime share the host's filesystem, so volumes mount only onto existing directories or under /run"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn paths_stay_inside_the_volume() {
        assert!(inside("token").is_ok());
        assert!(inside("a/b").is_ok());
        for bad in ["", "/etc/passwd", "../x", "a/../../b", "./a"] {
            assert!(inside(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keyed_data_by_items_or_whole() {
        let data = HashMap::from([
            ("a".to_string(), b"1".to_vec()),
            ("b".into(), b"2".to_vec()),
        ]);
        let all = keyed(&data, None, "cm", 0o644).unwrap();
        assert_eq!(
            all,
            vec![
                ("a".into(), b"1".to_vec(), 0o644),
                ("b".into(), b"2".to_vec(), 0o644)
            ]
        );
        let items: Vec<KeyToPath> =
            serde_json::from_value(json!([{"key": "b", "path": "x/y", "mode": 0o400}])).unwrap();
        let some = keyed(&data, Some(&items), "cm", 0o644).unwrap();
        assert_eq!(some, vec![("x/y".into(), b"2".to_vec(), 0o400)]);
        let missing: Vec<KeyToPath> =
            serde_json::from_value(json!([{"key": "c", "path": "c"}])).unwrap();
        assert_eq!(
            keyed(&data, Some(&missing), "configmap \"cm\"", 0o644).unwrap_err(),
            "configmap \"cm\": key \"c\" not found"
        );
    }

    #[test]
    fn downward_fields_read_as_the_kubelet_writes_them() {
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u",
            "labels": {"app": "web", "tier": "a\"b"}}, "spec": {"containers": []}}),
        );
        assert_eq!(field(&p, "metadata.namespace").unwrap(), "ns");
        assert_eq!(
            field(&p, "metadata.labels").unwrap(),
            "app=\"web\"\ntier=\"a\\\"b\""
        );
        assert!(
            field(&p, "spec.nodeName")
                .unwrap_err()
                .contains("not supported")
        );
    }

    #[test]
    fn mounts_only_of_projected_volumes_onto_usable_mount_points() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("sa");
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "volumes": [{"name": "kube-api-access-x", "projected": {"sources": []}}, {"name": "data", "emptyDir": {}}],
            "containers": [{"name": "c", "volumeMounts": [
                {"name": "kube-api-access-x", "mountPath": target.to_str().unwrap()},
                {"name": "data", "mountPath": "/data"}]}]}}));
        let v = PodVolumes::new(dir.path().join("volumes"));
        let c = &p.spec.as_ref().unwrap().containers[0];
        let err = v.mounts(&p, c).unwrap_err();
        assert!(err.contains("is not a directory on the host"), "{err}");
        std::fs::create_dir(&target).unwrap();
        let m = v.mounts(&p, c).unwrap();
        assert_eq!(m.len(), 1, "emptyDir is not mounted");
        assert_eq!(m[0].target.to_str().unwrap(), target.to_str().unwrap());
        assert!(
            m[0].source
                .to_str()
                .unwrap()
                .ends_with("volumes/kube-api-access-x")
        );
        assert!(mount_point(Path::new("/run/../etc/x")).is_err());
    }
}
