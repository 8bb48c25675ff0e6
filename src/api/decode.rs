//! Decoding objects as Koordinator's Go types accept them. Go's `Spec` is a plain struct:
//! an object without `spec` decodes to the zero spec. kube-derive makes `spec` required,
//! so every reader (watches, snapshots, the API server) goes through here instead of
//! calling serde directly and drifting apart.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// `text` as `K`; an object that lacks only `spec` decodes with an empty one.
pub fn from_str<K: DeserializeOwned>(text: &str) -> Result<K, serde_json::Error> {
    match serde_json::from_str::<K>(text) {
        Err(e) if lacks_spec(&e) => from_value(serde_json::from_str(text)?),
        other => other,
    }
}

/// `v` as `K`, with the same tolerance as [`from_str`].
pub fn from_value<K: DeserializeOwned>(mut v: Value) -> Result<K, serde_json::Error> {
    match K::deserialize(&v) {
        Err(e) if lacks_spec(&e) => {
            if let Some(o) = v.as_object_mut() {
                o.insert("spec".into(), Value::Object(Default::default()));
            }
            serde_json::from_value(v)
        }
        other => other,
    }
}

fn lacks_spec(e: &serde_json::Error) -> bool {
    e.to_string().starts_with("missing field `spec`")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::quota::{ElasticQuota, ElasticQuotaProfile, PodGroup};
    use crate::api::scheduling::device::Device;
    use crate::api::scheduling::migration::PodMigrationJob;
    use crate::api::scheduling::reservation::Reservation;
    use crate::api::slo::{NodeMetric, NodeSLO};
    use crate::api::topology::NodeResourceTopology;

    fn bare(api: &str, kind: &str) -> String {
        format!(r#"{{"apiVersion":"{api}","kind":"{kind}","metadata":{{"name":"x"}}}}"#)
    }

    /// Every Koordinator kind decodes without `spec`, as its Go type does.
    #[test]
    fn objects_without_spec_decode_as_go_does() {
        let m: NodeMetric = from_str(&bare("slo.koordinator.sh/v1alpha1", "NodeMetric")).unwrap();
        assert!(m.spec.metric_collect_policy.is_none());
        from_str::<NodeSLO>(&bare("slo.koordinator.sh/v1alpha1", "NodeSLO")).unwrap();
        let r = bare("scheduling.koordinator.sh/v1alpha1", "Reservation");
        from_str::<Reservation>(&r).unwrap();
        let j = bare("scheduling.koordinator.sh/v1alpha1", "PodMigrationJob");
        from_str::<PodMigrationJob>(&j).unwrap();
        from_str::<Device>(&bare("scheduling.koordinator.sh/v1alpha1", "Device")).unwrap();
        let q = bare("scheduling.sigs.k8s.io/v1alpha1", "ElasticQuota");
        from_str::<ElasticQuota>(&q).unwrap();
        from_str::<PodGroup>(&bare("scheduling.sigs.k8s.io/v1alpha1", "PodGroup")).unwrap();
        let p = bare("quota.koordinator.sh/v1alpha1", "ElasticQuotaProfile");
        from_str::<ElasticQuotaProfile>(&p).unwrap();
        let t = bare("topology.node.k8s.io/v1alpha1", "NodeResourceTopology");
        from_str::<NodeResourceTopology>(&t).unwrap();
        let v: Value =
            serde_json::from_str(&bare("slo.koordinator.sh/v1alpha1", "NodeMetric")).unwrap();
        from_value::<NodeMetric>(v).unwrap();
    }

    #[test]
    fn other_errors_still_name_the_field() {
        let bad = r#"{"apiVersion":"slo.koordinator.sh/v1alpha1","kind":"NodeMetric",
            "metadata":{"name":"x"},"spec":{"metricCollectPolicy":{"reportIntervalSeconds":"x"}}}"#;
        let e = from_str::<NodeMetric>(bad).unwrap_err().to_string();
        assert!(e.contains("invalid type"), "{e}");
        let e = from_str::<NodeMetric>(r#"{"metadata":7}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid type"), "{e}");
    }
}
