//! Koordinator's `Test_calculatePodResources_PageCacheLimit` and the page-cache cases of
//! `Test_makeCgroupResources`, then the files written on a fake Anolis cgroup tree and
//! skipped where the kernel has none.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::api::extension::qos::KubeQoS;
use crate::koordlet::qos::executor::{Executor, Outcome};
use crate::os::{Cgroups, Driver, Version};

const GI: i64 = 1024 * 1024 * 1024;
const MI: i64 = 1024 * 1024;

fn pod(resources: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "test-pod", "uid": "test-uid"},
        "spec": {"containers": [{"name": "c0", "resources": resources}]}}))
    .unwrap()
}

fn written(q: &MemoryQOS, limit: i64) -> (Option<String>, Option<String>, Option<String>) {
    let dir = CgroupDir::new("pod-test");
    let us = updates(q, limit, &dir);
    let get = |r| us.iter().find(|u| u.resource == r).map(|u| u.value.clone());
    (
        get(Resource::MemoryPageCacheLimitEnable),
        get(Resource::MemoryPageCacheLimitSize),
        get(Resource::MemoryPageCacheLimitSync),
    )
}

#[test]
fn test_calculate_pod_resources_page_cache_limit() {
    let limit = pod_memory_limit(
        &pod(json!({"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}})),
        false,
    );
    assert_eq!(limit, GI);
    let q = |f: &dyn Fn(&mut MemoryQOS)| {
        let mut q = MemoryQOS::default();
        f(&mut q);
        q
    };
    let s = |v: i64| Some(v.to_string());
    let on = Some("1".to_string());
    let off = Some("0".to_string());
    let cases: Vec<(&str, MemoryQOS, Option<String>, Option<String>)> = vec![
        (
            "size only",
            q(&|q| q.page_cache_limit_size = Some(512 * MI)),
            on.clone(),
            s(512 * MI),
        ),
        (
            "size capped by memory limit",
            q(&|q| q.page_cache_limit_size = Some(2 * GI)),
            on.clone(),
            s(GI),
        ),
        (
            "size zero resets",
            q(&|q| q.page_cache_limit_size = Some(0)),
            off.clone(),
            s(0),
        ),
        ("unset does nothing", q(&|_| {}), None, None),
        (
            "explicit enable overrides implicit enable, keeps size",
            q(&|q| {
                q.page_cache_limit_size = Some(512 * MI);
                q.page_cache_enable = Some(false);
            }),
            off.clone(),
            s(512 * MI),
        ),
        (
            "explicit enable alone toggles switch",
            q(&|q| q.page_cache_enable = Some(true)),
            on.clone(),
            None,
        ),
        (
            "sync reclaim mode",
            q(&|q| {
                q.page_cache_limit_size = Some(512 * MI);
                q.page_cache_reclaim_sync = Some(true);
            }),
            on.clone(),
            s(512 * MI),
        ),
        (
            "legacy percent field",
            q(&|q| q.page_cache_limit_percent = Some(50)),
            on.clone(),
            s(GI * 50 / 100),
        ),
        (
            "size takes precedence over percent",
            q(&|q| {
                q.page_cache_limit_percent = Some(50);
                q.page_cache_limit_size = Some(256 * MI);
            }),
            on.clone(),
            s(256 * MI),
        ),
    ];
    for (name, q, enable, size) in cases {
        let (e, sz, _) = written(&q, limit);
        assert_eq!((e, sz), (enable, size), "{name}");
    }
}

#[test]
fn the_reclaim_mode_is_asynchronous_unless_asked_and_unset_without_a_size() {
    let mut q = MemoryQOS {
        page_cache_limit_size: Some(512 * MI),
        ..Default::default()
    };
    assert_eq!(
        written(&q, GI).2.as_deref(),
        Some("0"),
        "async mode by default"
    );
    q.page_cache_reclaim_sync = Some(true);
    assert_eq!(written(&q, GI).2.as_deref(), Some("1"));
    q.page_cache_limit_size = Some(0);
    assert_eq!(written(&q, GI).2, None, "reset: no sync mode");
}

#[test]
fn the_pod_memory_limit_as_koordinator_takes_it() {
    let be = |lim: Option<&str>| {
        let mut r = json!({"requests": {"kubernetes.io/batch-memory": "1Gi"}});
        if let Some(l) = lim {
            r["limits"] = json!({"kubernetes.io/batch-memory": l});
        }
        pod_memory_limit(&pod(r), true)
    };
    assert_eq!(be(Some("2Gi")), 2 * GI);
    assert_eq!(be(None), -1, "a BE container without a limit: unlimited");
    assert_eq!(pod_memory_limit(&pod(json!({})), false), -1);
    // A percentage of an unlimited pod writes nothing.
    let q = MemoryQOS {
        page_cache_limit_percent: Some(50),
        ..Default::default()
    };
    assert_eq!(written(&q, -1), (None, None, None));
}

#[test]
fn anolis_kernels_get_the_files_and_others_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(dir.path(), Version::V2, Driver::Cgroupfs, "");
    let (anolis, plain) = (
        cg.pod_dir(KubeQoS::Burstable, "u1"),
        cg.pod_dir(KubeQoS::Burstable, "u2"),
    );
    for (d, files) in [(&anolis, true), (&plain, false)] {
        let base = dir.path().join(d.as_str());
        std::fs::create_dir_all(&base).unwrap();
        if files {
            // As a kernel leaves them: off, no size, synchronous reclaim.
            for (f, v) in [("enable", "0"), ("size", "0"), ("sync", "1")] {
                std::fs::write(base.join(format!("memory.pagecache_limit.{f}")), v).unwrap();
            }
        }
    }
    let ex = Executor::new(cg.clone(), Duration::from_secs(60));
    let q = MemoryQOS {
        page_cache_limit_size: Some(512 * MI),
        ..Default::default()
    };
    for u in updates(&q, GI, &anolis) {
        assert!(
            matches!(ex.update(&u).unwrap(), Outcome::Written(_)),
            "{u:?}"
        );
    }
    let size = std::fs::read_to_string(cg.file(Resource::MemoryPageCacheLimitSize, &anolis));
    assert_eq!(size.unwrap().trim(), (512 * MI).to_string());
    for u in updates(&q, GI, &plain) {
        assert_eq!(ex.update(&u).unwrap(), Outcome::Missing, "{u:?}");
    }
}
