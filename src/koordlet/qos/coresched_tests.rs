use std::collections::HashMap;
use std::io;
use std::sync::Mutex;

use serde_json::json;

use super::*;
use crate::api::slo::nodeslo::ResourceQOSStrategy;

/// A kernel with core scheduling: one cookie per process (thread groups are single pids
/// here), new cookies numbered from 100.
#[derive(Default)]
struct FakeKernel {
    cookies: Mutex<HashMap<u32, u64>>,
    next: Mutex<u64>,
}

impl CookieOps for FakeKernel {
    fn get(&self, pid: u32) -> io::Result<u64> {
        Ok(*self.cookies.lock().unwrap().get(&pid).unwrap_or(&0))
    }
    fn create(&self, pid: u32) -> io::Result<()> {
        let mut n = self.next.lock().unwrap();
        *n += 1;
        self.cookies.lock().unwrap().insert(pid, 99 + *n);
        Ok(())
    }
    fn share(&self, from: Option<u32>, to: &[u32]) -> Vec<(u32, io::Error)> {
        let c = from.map(|f| self.get(f).unwrap()).unwrap_or(0);
        let mut m = self.cookies.lock().unwrap();
        for p in to {
            m.insert(*p, c);
        }
        vec![]
    }
}

fn rule(policy: &str) -> Rule {
    let q: ResourceQOSStrategy = serde_json::from_value(json!({
        "policies": {"cpuPolicy": policy},
        "lsClass": {"cpuQOS": {"enable": true, "groupIdentity": 2}},
        "beClass": {"cpuQOS": {"enable": true, "groupIdentity": -1, "schedIdle": 1}},
    }))
    .unwrap();
    Rule::new(&q)
}

fn pod(name: &str, qos: &str, labels: serde_json::Value) -> Pod {
    let mut l = labels.as_object().cloned().unwrap_or_default();
    l.insert("koordinator.sh/qosClass".into(), json!(qos));
    serde_json::from_value(
        json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "labels": l}}),
    )
    .unwrap()
}

#[test]
fn groups_follow_labels_policies_and_expeller() {
    let r = rule("coreSched");
    assert_eq!(
        r.group(&pod("a", "LS", json!({}))).as_deref(),
        Some("-expeller")
    );
    let g = json!({LABEL_CORE_SCHED_GROUP_ID: "tenant-1"});
    assert_eq!(
        r.group(&pod("a", "LS", g.clone())).as_deref(),
        Some("tenant-1-expeller")
    );
    assert_eq!(
        r.group(&pod("b", "BE", g)).as_deref(),
        Some("tenant-1"),
        "BE is no expeller by default"
    );
    let ex = json!({LABEL_CORE_SCHED_POLICY: "exclusive"});
    assert_eq!(r.group(&pod("c", "BE", ex)).as_deref(), Some("uid-c"));
    let none = json!({LABEL_CORE_SCHED_POLICY: "none"});
    assert_eq!(r.group(&pod("d", "LS", none)), None);
    assert_eq!(
        r.group(&pod("e", "LSR", json!({}))),
        None,
        "lsrClass has no cpuQOS enabled"
    );
    assert_eq!(r.group(&pod("f", "SYSTEM", json!({}))), None);
    assert!(r.cpu_idle(KubeQoS::BestEffort) && !r.cpu_idle(KubeQoS::Burstable));
    let gi = rule("groupIdentity");
    assert!(!gi.enabled() && gi.group(&pod("a", "LS", json!({}))).is_none());
    assert!(
        !gi.cpu_idle(KubeQoS::BestEffort),
        "cpu.idle only under the coreSched policy"
    );
}

#[test]
fn a_group_shares_one_cookie_and_other_groups_get_their_own() {
    let k = FakeKernel::default();
    let r = rule("coreSched");
    let g1 = json!({LABEL_CORE_SCHED_GROUP_ID: "g1"});
    let (a, b, c) = (
        pod("a", "BE", g1.clone()),
        pod("b", "BE", g1),
        pod("c", "BE", json!({})),
    );
    let pods = vec![(&a, vec![1, 2]), (&b, vec![3]), (&c, vec![4])];
    assign(&k, &r, &pods);
    let get = |p| k.get(p).unwrap();
    assert!(
        get(1) != 0 && get(1) == get(2) && get(2) == get(3),
        "group g1 shares a cookie"
    );
    assert!(
        get(4) != 0 && get(4) != get(1),
        "the default group has a cookie of its own"
    );
    // Nothing to do the second time; a new process of the group joins the existing cookie.
    assert!(assign(&k, &r, &pods).is_empty());
    let pods = vec![(&a, vec![1, 2]), (&b, vec![3, 5]), (&c, vec![4])];
    assign(&k, &r, &pods);
    assert_eq!(get(5), get(1));
}

#[test]
fn switching_the_policy_off_clears_cookies_but_not_system_pods() {
    let k = FakeKernel::default();
    let (a, s) = (pod("a", "LS", json!({})), pod("s", "SYSTEM", json!({})));
    k.cookies.lock().unwrap().insert(9, 7);
    assign(&k, &rule("coreSched"), &[(&a, vec![1]), (&s, vec![9])]);
    assert_ne!(k.get(1).unwrap(), 0);
    assign(&k, &rule("groupIdentity"), &[(&a, vec![1]), (&s, vec![9])]);
    assert_eq!(k.get(1).unwrap(), 0, "back to the default cookie");
    assert_eq!(k.get(9).unwrap(), 7, "SYSTEM pods are left alone");
}

#[test]
fn the_oldest_cookie_of_a_group_wins_and_a_cookie_of_another_group_is_not_reused() {
    let k = FakeKernel::default();
    {
        let mut m = k.cookies.lock().unwrap();
        m.insert(1, 50); // a: group g (oldest)
        m.insert(2, 60); // b: group g, a second cookie (e.g. made before a restart)
        m.insert(3, 50); // c: moved to group h, still holding g's cookie
    }
    let g = json!({LABEL_CORE_SCHED_GROUP_ID: "g"});
    let h = json!({LABEL_CORE_SCHED_GROUP_ID: "h"});
    let (a, b, c) = (
        pod("a", "BE", g.clone()),
        pod("b", "BE", g),
        pod("c", "BE", h),
    );
    assign(
        &k,
        &rule("coreSched"),
        &[(&a, vec![1]), (&b, vec![2]), (&c, vec![3])],
    );
    assert_eq!(k.get(2).unwrap(), 50);
    let hc = k.get(3).unwrap();
    assert!(
        hc != 0 && hc != 50,
        "group h gets a cookie of its own, got {hc}"
    );
}

#[test]
fn cpu_idle_goes_on_the_kube_qos_cgroups_that_have_it() {
    use crate::os::{Cgroups, Driver, Version};
    let dir = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(dir.path(), Version::V1, Driver::Cgroupfs, "");
    for k in [KubeQoS::Guaranteed, KubeQoS::BestEffort] {
        let d = dir.path().join("cpu").join(cg.qos_dir(k).as_str());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpu.idle"), "0").unwrap();
    }
    let ex = Arc::new(Executor::new(cg.clone(), Duration::from_secs(60)));
    let s = CoreSched::new(ex, dir.path().join("proc"), Arc::new(FakeKernel::default()));
    let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {
        "policies": {"cpuPolicy": "coreSched"},
        "lsClass": {"cpuQOS": {"enable": true, "groupIdentity": 2}},
        "beClass": {"cpuQOS": {"enable": true, "groupIdentity": -1, "schedIdle": 1}}}}});
    let states = States {
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        ..Default::default()
    };
    s.cpu_idle(&states, &Rule::new(&states.slo().resource_qos));
    use crate::os::Resource;
    let read = |k| std::fs::read_to_string(cg.file(Resource::CpuIdle, &cg.qos_dir(k))).unwrap();
    assert_eq!(read(KubeQoS::BestEffort).trim(), "1");
    assert_eq!(read(KubeQoS::Guaranteed).trim(), "0");
    assert!(
        !cg.file(Resource::CpuIdle, &cg.qos_dir(KubeQoS::Burstable))
            .exists()
    );
}

/// Koordinator's `container_core_sched_cookie` and `core_sched_cookie_manage_status`: each
/// grouped container's cookie, and per group whether its processes share one cookie.
#[test]
fn cookie_report_names_each_containers_cookie_and_each_groups_state() {
    use crate::koordlet::informer::PodMeta;
    use crate::os::{Cgroups, Driver, Version};
    let dir = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(dir.path().join("cg"), Version::V1, Driver::Cgroupfs, "");
    let meta = |name: &str, group: &str, pid: u32| {
        let mut p = pod(
            name,
            "LS",
            json!({"koordinator.sh/core-sched-group-id": group}),
        );
        p.spec = Some(serde_json::from_value(json!({"containers": [{"name": "c"}]})).unwrap());
        p.status = Some(
            serde_json::from_value(
                json!({"qosClass": "Burstable", "containerStatuses": [{"name": "c",
                "containerID": format!("containerd://{name}"), "image": "i", "imageID": "",
                "ready": true, "restartCount": 0}]}),
            )
            .unwrap(),
        );
        let m = PodMeta::new(p, &cg).unwrap();
        for d in [&m.dir, &m.containers[0].dir] {
            let at = dir.path().join("cg/cpu").join(d.as_str());
            std::fs::create_dir_all(&at).unwrap();
            std::fs::write(at.join("cgroup.procs"), format!("{pid}\n")).unwrap();
        }
        m
    };
    let slo: crate::api::slo::NodeSLO = serde_json::from_value(json!({
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "n1"},
        "spec": {"resourceQOSStrategy": {"policies": {"cpuPolicy": "coreSched"},
            "lsClass": {"cpuQOS": {"enable": true}}}}}))
    .unwrap();
    let states = States {
        pods: Arc::new(vec![
            meta("a", "g1", 11),
            meta("b", "g1", 12),
            meta("c", "g2", 13),
        ]),
        node_slo: Some(Arc::new(slo)),
        ..Default::default()
    };
    let kernel = FakeKernel::default();
    kernel
        .cookies
        .lock()
        .unwrap()
        .extend([(11, 500), (12, 500), (13, 0)]);
    let ex = Arc::new(Executor::new(cg.clone(), Duration::from_secs(60)));
    let mut s = CoreSched::new(ex, dir.path().join("proc"), Arc::new(kernel));
    s.probed = true;
    let (series, groups) = s.cookie_report(&states, "n1");
    let cookie_of = |pod: &str| {
        series
            .iter()
            .find(|(l, _)| l.iter().any(|(k, v)| *k == "pod_name" && v == pod))
            .map(|(l, _)| {
                l.iter()
                    .find(|(k, _)| *k == "core_sched_cookie")
                    .unwrap()
                    .1
                    .clone()
            })
    };
    assert_eq!(cookie_of("a").as_deref(), Some("500"));
    assert_eq!(cookie_of("b").as_deref(), Some("500"));
    assert_eq!(cookie_of("c"), None, "the default cookie is no cookie");
    // LS pods expel BE ones by default: their groups carry the `-expeller` suffix.
    let want = [("g1-expeller", true), ("g2-expeller", false)].map(|(g, ok)| (g.to_string(), ok));
    assert_eq!(groups, want);
}
