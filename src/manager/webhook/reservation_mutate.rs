//! `/mutate-reservation` (`pkg/webhook/reservation/mutating/`, gate
//! `ReservationMutatingWebhook`, off as in Koordinator): a new Reservation gets what the
//! ClusterColocationProfiles whose `selector` matches its labels set — labels,
//! annotations, key mappings and suffixes, QoS and Koordinator priority labels, the
//! template's scheduler name and PriorityClass, and the profile's patch — in name order,
//! each with its `probability`.

use serde_json::Value;

use super::Handlers;
use super::json as j;
use super::pod_mutate::{apply_profile, rolls_in, selector_matches};
use super::review::{Operation, Request, Verdict};
use crate::api::scheduling::reservation::Reservation;

pub fn handle(h: &Handlers, req: &Request) -> Verdict {
    if req.operation != Operation::Create || !req.sub_resource.is_empty() {
        return Verdict::Allow;
    }
    let Some(original) = req.object.as_ref() else {
        return Verdict::deny("reservation create without an object");
    };
    if let Err(e) = serde_json::from_value::<Reservation>(original.clone()) {
        return Verdict::deny(format!("decoding the Reservation: {e}"));
    }
    let mut r = original.clone();
    match mutate(h, &mut r) {
        Ok(()) => Verdict::patched(original, &r),
        Err(v) => v,
    }
}

fn mutate(h: &Handlers, r: &mut Value) -> Result<(), Verdict> {
    let labels = j::labels(r);
    let mut profiles: Vec<_> = h
        .lookup
        .profiles()
        .into_iter()
        .filter(|p| selector_matches(p.spec.selector.as_ref(), Some(&labels)))
        .collect();
    profiles.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for p in &profiles {
        if rolls_in(h, p)? {
            apply_profile(p, r, Some((h, &["spec", "template", "spec"])))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Koordinator's `TestClusterColocationProfileMutatingReservation` cases
    //! (`pkg/webhook/reservation/mutating/cluster_colocation_profile_test.go`), with koord's
    //! PriorityClass `koord-prod` (9000, PreemptLowerPriority) for its `koordinator-prod`.
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;
    use crate::api::config::ClusterColocationProfile;
    use crate::manager::webhook::lookup::Fixed;
    use crate::manager::webhook::test_util::{handlers_with, patched, request};

    fn reservation() -> Value {
        json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
            "metadata": {"name": "test-reservation-1",
                "labels": {"koordinator-colocation-reservation": "true"}},
            "spec": {"owners": [{"object": {"name": "p"}}],
                "template": {"spec": {"containers": [{"name": "test-container-a",
                    "resources": {"limits": {"cpu": "1", "memory": "4Gi"},
                        "requests": {"cpu": "1", "memory": "4Gi"}}}],
                "overhead": {"cpu": "1", "memory": "2Gi"},
                "schedulerName": "nonExistSchedulerName"}}}})
    }

    fn profile(probability: Option<Value>) -> Arc<ClusterColocationProfile> {
        let mut spec = json!({"selector": {"matchLabels": {"koordinator-colocation-reservation": "true"}},
            "labels": {"testLabelA": "valueA"}, "annotations": {"testAnnotationA": "valueA"},
            "schedulerName": "koordinator-scheduler", "koordinatorPriority": 1111,
            "priorityClassName": "koord-prod", "qosClass": "LS",
            "patch": {"metadata": {"labels": {"test-patch-label": "patch-a"},
                "annotations": {"test-patch-annotation": "patch-b"}}}});
        if let Some(p) = probability {
            spec["probability"] = p;
        }
        Arc::new(
            serde_json::from_value(json!({"apiVersion": "config.koordinator.sh/v1alpha1",
                "kind": "ClusterColocationProfile", "metadata": {"name": "test-profile"},
                "spec": spec}))
            .unwrap(),
        )
    }

    fn run(probability: Option<Value>, roll: u32) -> Value {
        let f = Fixed {
            profiles: vec![profile(probability)],
            ..Fixed::default()
        }
        .with_koord_priority_classes();
        let h = handlers_with(f, crate::manager::features::defaults(), roll);
        let obj = reservation();
        let v = handle(
            &h,
            &request("Reservation", "CREATE", "", Some(obj.clone()), None),
        );
        patched(&obj, &v)
    }

    #[test]
    fn mutating_reservation() {
        let out = run(None, 0);
        assert_eq!(
            out["metadata"]["labels"],
            json!({"koordinator-colocation-reservation": "true", "testLabelA": "valueA",
                "test-patch-label": "patch-a", "koordinator.sh/qosClass": "LS",
                "koordinator.sh/priority": "1111"})
        );
        assert_eq!(
            out["metadata"]["annotations"],
            json!({"testAnnotationA": "valueA", "test-patch-annotation": "patch-b"})
        );
        let spec = &out["spec"]["template"]["spec"];
        assert_eq!(spec["schedulerName"], "koordinator-scheduler");
        assert_eq!(spec["priorityClassName"], "koord-prod");
        assert_eq!(spec["priority"], 9000);
        assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
        assert_eq!(
            spec["overhead"],
            json!({"cpu": "1", "memory": "2Gi"}),
            "untouched"
        );
    }

    #[test]
    fn mutating_reservation_by_percent() {
        assert_eq!(run(Some(json!("0%")), 0), reservation(), "percent 0");
        let applied = run(Some(json!("50%")), 30);
        assert_eq!(
            applied["metadata"]["labels"]["testLabelA"], "valueA",
            "percent 50, rand=30"
        );
        assert_eq!(
            run(Some(json!("50%")), 70),
            reservation(),
            "percent 50, rand=70"
        );
        let full = run(Some(json!("100%")), 99);
        assert_eq!(
            full["spec"]["template"]["spec"]["schedulerName"],
            "koordinator-scheduler"
        );
    }

    #[test]
    fn mutating_failed_and_ignored() {
        let f = Fixed {
            profiles: vec![profile(None)],
            ..Fixed::default()
        };
        let h = handlers_with(f, crate::manager::features::defaults(), 0);
        let obj = reservation();
        let v = handle(
            &h,
            &request("Reservation", "CREATE", "", Some(obj.clone()), None),
        );
        assert!(
            matches!(&v, Verdict::Deny { code: 500, message } if message.contains("koord-prod")),
            "no PriorityClass koord-prod: {v:?}"
        );
        let update = request("Reservation", "UPDATE", "", Some(obj.clone()), Some(obj));
        assert_eq!(handle(&h, &update), Verdict::Allow);
    }
}
