//! ControllerRevisions, the template history of DaemonSets and StatefulSets (kube's
//! `controller/history`): one per template, `<owner>-<hash>`, whose `data` is the patch
//! that puts the template back (`{"spec": {"template": {..., "$patch": "replace"}}}`, what
//! `kubectl rollout undo` applies) and whose `revision` orders them. A template used again
//! gets its revision renumbered to the newest. Beyond `revisionHistoryLimit`, the oldest
//! revisions no live pod uses are deleted.

use std::collections::HashSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::replicaset::owner_ref;

/// The label pods and revisions carry.
pub const LABEL_HASH: &str = "controller-revision-hash";

#[derive(Debug, Default)]
pub struct Plan {
    pub create: Option<Value>,
    /// (name, revision): an existing revision of the current template made the newest.
    pub renumber: Option<(String, i64)>,
    pub delete: Vec<String>,
}

/// The owner whose template history this is.
pub struct Owner<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub meta: &'a ObjectMeta,
    pub template: &'a PodTemplateSpec,
    pub history_limit: i32,
}

/// kube's revision data: the patch that restores `template`.
pub fn data_of(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or_default();
    t["$patch"] = "replace".into();
    json!({"spec": {"template": t}})
}

/// The template a revision restores.
pub fn template_of(cr: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = cr.data.as_ref()?.0.pointer("/spec/template")?.clone();
    t.as_object_mut()?.remove("$patch");
    serde_json::from_value(t).ok()
}

pub fn name_for(owner: &ObjectMeta, hash: &str) -> String {
    format!("{}-{hash}", owner.name.as_deref().unwrap_or_default())
}

/// One pass: the current template's revision made (or renumbered) newest, and the history
/// trimmed. `in_use` are the revision names live pods carry.
pub fn plan(
    o: &Owner,
    hash: &str,
    owned: &[&ControllerRevision],
    in_use: &HashSet<String>,
) -> Plan {
    let mut out = Plan::default();
    let name = name_for(o.meta, hash);
    let newest = owned.iter().map(|r| r.revision).max().unwrap_or(0);
    match owned
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(&name))
    {
        Some(r) if r.revision < newest => out.renumber = Some((name.clone(), newest + 1)),
        Some(_) => {}
        None => {
            let mut labels = o
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            labels.insert(LABEL_HASH.into(), hash.into());
            out.create = Some(json!({
                "apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": name, "namespace": o.meta.namespace, "labels": labels,
                    "ownerReferences": [owner_ref(o.api_version, o.kind, o.meta)]},
                "data": data_of(o.template),
                "revision": newest + 1,
            }));
        }
    }
    let mut idle: Vec<&&ControllerRevision> = owned
        .iter()
        .filter(|r| {
            let n = r.metadata.name.clone().unwrap_or_default();
            n != name && !in_use.contains(&n)
        })
        .collect();
    let limit = o.history_limit.max(0) as usize;
    if idle.len() > limit {
        idle.sort_by_key(|r| r.revision);
        out.delete = idle[..idle.len() - limit]
            .iter()
            .map(|r| r.metadata.name.clone().unwrap_or_default())
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(json!({"metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "c", "image": image}]}}))
        .unwrap()
    }

    fn revision(name: &str, rev: i64, image: &str) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some(k8s_openapi::apimachinery::pkg::runtime::RawExtension(
                data_of(&template(image)),
            )),
            revision: rev,
        }
    }

    #[test]
    fn a_revision_per_template_renumbered_when_reused_and_trimmed() {
        let meta = ObjectMeta {
            name: Some("agent".into()),
            namespace: Some("d".into()),
            uid: Some("u".into()),
            ..Default::default()
        };
        let t2 = template("busybox:2");
        let o = Owner {
            api_version: "apps/v1",
            kind: "DaemonSet",
            meta: &meta,
            template: &t2,
            history_limit: 1,
        };
        let p = plan(&o, "h2", &[], &HashSet::new());
        let cr = p.create.unwrap();
        assert_eq!(cr["metadata"]["name"], "agent-h2");
        assert_eq!(cr["revision"], 1);
        assert_eq!(cr["metadata"]["labels"][LABEL_HASH], "h2");
        assert_eq!(cr["data"]["spec"]["template"]["$patch"], "replace");
        let back: ControllerRevision = serde_json::from_value(cr).unwrap();
        assert_eq!(
            template_of(&back),
            Some(t2.clone()),
            "restores the template"
        );

        // Back to an older template (undo): its revision becomes the newest.
        let (r1, r2, r3) = (
            revision("agent-h1", 1, "busybox:1"),
            revision("agent-h2", 2, "busybox:2"),
            revision("agent-h3", 3, "busybox:3"),
        );
        let p = plan(&o, "h2", &[&r1, &r2, &r3], &HashSet::new());
        assert_eq!(p.renumber, Some(("agent-h2".into(), 4)));
        assert!(p.create.is_none());
        // One idle revision kept: the oldest goes, unless a pod still runs it.
        assert_eq!(p.delete, ["agent-h1"]);
        let used = HashSet::from(["agent-h1".to_string()]);
        assert!(plan(&o, "h2", &[&r1, &r2, &r3], &used).delete.is_empty());
    }
}
