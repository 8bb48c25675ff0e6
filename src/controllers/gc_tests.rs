use super::*;

fn owner_ref(kind: &Kind, name: &str, block: bool) -> OwnerReference {
    let api_version = match kind.group {
        "" => kind.version.to_string(),
        g => format!("{g}/{}", kind.version),
    };
    OwnerReference {
        api_version,
        kind: kind.kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(true),
        block_owner_deletion: Some(block),
    }
}

fn meta(name: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("default".into()),
        uid: Some(format!("uid-{name}")),
        resource_version: Some("7".into()),
        owner_references: (!owners.is_empty()).then_some(owners),
        ..Default::default()
    }
}

fn deleting(mut m: ObjectMeta, finalizers: &[&str]) -> ObjectMeta {
    m.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    m.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    m
}

fn o<'a>(kind: &'static Kind, meta: &'a ObjectMeta) -> Obj<'a> {
    Obj { kind, meta }
}

fn names(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::Delete {
                target, foreground, ..
            } => format!("delete {} foreground={foreground}", target.name),
            Action::Unown { target, keep, .. } => {
                format!("unown {} keep={}", target.name, keep.len())
            }
            Action::Release {
                target, finalizer, ..
            } => format!("release {} {finalizer}", target.name),
        })
        .collect()
}

#[test]
fn orphan_removes_references_then_the_finalizer() {
    let d = deleting(meta("web", vec![]), &[ORPHAN, "example.com/keep"]);
    let rs = meta("web-1", vec![owner_ref(&DEPLOYMENT, "web", true)]);
    let objs = [o(&DEPLOYMENT, &d), o(&REPLICA_SET, &rs)];
    assert_eq!(names(&plan(&objs)), ["unown web-1 keep=0"]);
    let alone = [o(&DEPLOYMENT, &d)];
    let actions = plan(&alone);
    assert_eq!(names(&actions), ["release web orphan"]);
    let Action::Release { keep, .. } = &actions[0] else {
        unreachable!()
    };
    assert_eq!(keep, &["example.com/keep".to_string()]);
}

#[test]
fn foreground_deletes_dependents_and_waits_for_blocking_ones() {
    let rs = deleting(meta("web-1", vec![]), &[FOREGROUND]);
    let pod = meta("web-1-a", vec![owner_ref(&REPLICA_SET, "web-1", true)]);
    let objs = [o(&REPLICA_SET, &rs), o(&POD, &pod)];
    assert_eq!(names(&plan(&objs)), ["delete web-1-a foreground=false"]);
    // Terminating but still there: still blocking, not deleted twice.
    let going = deleting(pod.clone(), &[]);
    let objs = [o(&REPLICA_SET, &rs), o(&POD, &going)];
    assert!(plan(&objs).is_empty());
    // A dependent that does not block its owner does not hold it.
    let loose = meta("web-1-b", vec![owner_ref(&REPLICA_SET, "web-1", false)]);
    let objs = [o(&REPLICA_SET, &rs), o(&POD, &loose)];
    assert_eq!(
        names(&plan(&objs)),
        [
            "delete web-1-b foreground=false",
            "release web-1 foregroundDeletion"
        ]
    );
}

#[test]
fn foreground_cascades_through_dependents_that_own_others() {
    let d = deleting(meta("web", vec![]), &[FOREGROUND]);
    let rs = meta("web-1", vec![owner_ref(&DEPLOYMENT, "web", true)]);
    let pod = meta("web-1-a", vec![owner_ref(&REPLICA_SET, "web-1", true)]);
    let objs = [o(&DEPLOYMENT, &d), o(&REPLICA_SET, &rs), o(&POD, &pod)];
    assert_eq!(names(&plan(&objs)), ["delete web-1 foreground=true"]);
}

#[test]
fn dependents_of_gone_owners_are_deleted_or_lose_the_reference() {
    let orphaned = meta("web-1-a", vec![owner_ref(&REPLICA_SET, "gone", true)]);
    let mut shared = meta("shared", vec![owner_ref(&REPLICA_SET, "gone", true)]);
    shared
        .owner_references
        .as_mut()
        .unwrap()
        .push(OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            name: "w".into(),
            uid: "uid-w".into(),
            ..Default::default()
        });
    let unknown_owner = meta(
        "custom",
        vec![OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            name: "w".into(),
            uid: "uid-w".into(),
            ..Default::default()
        }],
    );
    let objs = [
        o(&POD, &orphaned),
        o(&POD, &shared),
        o(&POD, &unknown_owner),
    ];
    let actions = plan(&objs);
    assert_eq!(
        names(&actions),
        ["delete web-1-a foreground=false", "unown shared keep=1"]
    );
    let Action::Delete { unless_owners, .. } = &actions[0] else {
        unreachable!()
    };
    assert_eq!(
        unless_owners[0].name, "gone",
        "confirmed gone before deleting"
    );
}

#[test]
fn owner_kinds_from_references() {
    assert_eq!(
        kind_of(&owner_ref(&STATEFUL_SET, "db", true)),
        Some(&STATEFUL_SET)
    );
    let mut core = owner_ref(&POD, "p", true);
    core.api_version = "v1".into();
    assert_eq!(kind_of(&core), Some(&POD));
    let mut other = owner_ref(&JOB, "j", true);
    other.api_version = "batch.volcano.sh/v1alpha1".into();
    assert_eq!(kind_of(&other), None);
}
