//! The ElasticQuota objects Koordinator's plugin creates at start when absent
//! (`createRootQuotaIfNotPresent` and its siblings): the root of every quota tree, and the
//! system and default quotas (their `max` from the plugin's `systemQuotaGroupMax` /
//! `defaultQuotaGroupMax`), in `quotaGroupNamespace` — so their used/request are visible
//! like any other quota's.

use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use super::plugins::elasticquota::args::Args;
use crate::api::extension::keys::{
    LABEL_QUOTA_ALLOW_LENT, LABEL_QUOTA_IS_PARENT, LABEL_QUOTA_PARENT, QUOTA_DEFAULT, QUOTA_ROOT,
    QUOTA_SYSTEM,
};
use crate::api::quota::ElasticQuota;

/// The three built-in quotas as Koordinator writes them.
pub fn builtin_quotas(args: &Args) -> Vec<ElasticQuota> {
    let ns = &args.quota_group_namespace;
    let max = |a: &crate::api::pod::Amounts| json!(crate::api::pod::resource_list(a));
    let objects = [
        json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": QUOTA_ROOT, "namespace": ns, "labels": {
                LABEL_QUOTA_IS_PARENT: "true", LABEL_QUOTA_ALLOW_LENT: "false", LABEL_QUOTA_PARENT: ""}},
            "spec": {}}),
        json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": QUOTA_SYSTEM, "namespace": ns},
            "spec": {"max": max(&args.settings.system_max)}}),
        json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": QUOTA_DEFAULT, "namespace": ns},
            "spec": {"max": max(&args.settings.default_max)}}),
    ];
    objects
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect()
}

/// Creates each built-in quota that does not exist yet (another replica creating it first
/// is fine).
pub async fn ensure(client: &kube::Client, args: &Args) {
    let api: Api<ElasticQuota> = Api::namespaced(client.clone(), &args.quota_group_namespace);
    for q in builtin_quotas(args) {
        let name = q.metadata.name.clone().unwrap_or_default();
        match api.get_opt(&name).await {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(quota = %name, error = %e, "built-in ElasticQuota not checked");
                continue;
            }
        }
        match api.create(&PostParams::default(), &q).await {
            Ok(_) => tracing::info!(quota = %name, "built-in ElasticQuota created"),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                tracing::warn!(quota = %name, error = %e, "built-in ElasticQuota not created")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_system_and_default_as_koordinator_writes_them() {
        let args = Args::parse(Some(&json!({"quotaGroupNamespace": "quotas",
            "systemQuotaGroupMax": {"cpu": "4"}})))
        .unwrap();
        let q = builtin_quotas(&args);
        let names: Vec<_> = q
            .iter()
            .map(|q| q.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(names, [QUOTA_ROOT, QUOTA_SYSTEM, QUOTA_DEFAULT]);
        assert!(
            q.iter()
                .all(|q| q.metadata.namespace.as_deref() == Some("quotas"))
        );
        let root = q[0].metadata.labels.as_ref().unwrap();
        assert_eq!(root[LABEL_QUOTA_IS_PARENT], "true");
        assert_eq!(root[LABEL_QUOTA_ALLOW_LENT], "false");
        let system_max = q[1].spec.max.as_ref().unwrap();
        assert_eq!(system_max["cpu"].0, "4");
    }
}
