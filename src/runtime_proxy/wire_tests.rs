//! koord's RuntimeHookService against Koordinator's `apis/runtime/v1alpha1/api.proto`,
//! checked on the wire: a request encoded with koord's types is read back by field number
//! alone, as Koordinator's koordlet would read it.

use std::collections::BTreeMap;

use prost::Message;
use prost::bytes::Buf;
use prost::encoding::{WireType, decode_key, decode_varint};

use super::proto::{self, runtime_hook_service_server::SERVICE_NAME};

#[derive(Debug, PartialEq)]
enum F {
    Varint(u64),
    Bytes(Vec<u8>),
}

/// Fields by number, in order.
fn fields(mut b: &[u8]) -> BTreeMap<u32, Vec<F>> {
    let mut out: BTreeMap<u32, Vec<F>> = BTreeMap::new();
    while b.has_remaining() {
        let (n, wt) = decode_key(&mut b).unwrap();
        let v = match wt {
            WireType::Varint => F::Varint(decode_varint(&mut b).unwrap()),
            WireType::LengthDelimited => {
                let len = decode_varint(&mut b).unwrap() as usize;
                let v = b[..len].to_vec();
                b.advance(len);
                F::Bytes(v)
            }
            other => panic!("unexpected wire type {other:?}"),
        };
        out.entry(n).or_default().push(v);
    }
    out
}

fn bytes(f: &BTreeMap<u32, Vec<F>>, n: u32) -> &[u8] {
    match f.get(&n).and_then(|v| v.first()) {
        Some(F::Bytes(b)) => b,
        other => panic!("field {n}: {other:?}"),
    }
}

fn varint(f: &BTreeMap<u32, Vec<F>>, n: u32) -> u64 {
    match f.get(&n).and_then(|v| v.first()) {
        Some(F::Varint(v)) => *v,
        other => panic!("field {n}: {other:?}"),
    }
}

#[test]
fn container_hook_requests_match_koordinators_field_numbers() {
    let req = proto::ContainerResourceHookRequest {
        pod_meta: Some(proto::PodSandboxMetadata {
            name: "web".into(),
            uid: "u1".into(),
            namespace: "ns".into(),
            attempt: 2,
        }),
        container_meta: Some(proto::ContainerMetadata {
            name: "c".into(),
            attempt: 3,
            id: "cid".into(),
        }),
        container_annotations: [("a".to_string(), "b".to_string())].into(),
        container_resources: Some(proto::LinuxContainerResources {
            cpu_period: 100_000,
            cpu_quota: 50_000,
            cpu_shares: 2,
            memory_limit_in_bytes: 1 << 20,
            oom_score_adj: 7,
            cpuset_cpus: "0-1".into(),
            cpuset_mems: "0".into(),
            memory_swap_limit_in_bytes: 1 << 21,
            ..Default::default()
        }),
        pod_cgroup_parent: "/kubepods/besteffort/podu1".into(),
        container_envs: [("E".to_string(), "1".to_string())].into(),
        ..Default::default()
    };
    let top = fields(&req.encode_to_vec());
    let pod = fields(bytes(&top, 1));
    assert_eq!(bytes(&pod, 1), b"web");
    assert_eq!(bytes(&pod, 2), b"u1");
    assert_eq!(bytes(&pod, 3), b"ns");
    assert_eq!(varint(&pod, 4), 2);
    let c = fields(bytes(&top, 2));
    assert_eq!(
        (bytes(&c, 1), varint(&c, 2), bytes(&c, 3)),
        (&b"c"[..], 3, &b"cid"[..])
    );
    let ann = fields(bytes(&top, 3));
    assert_eq!((bytes(&ann, 1), bytes(&ann, 2)), (&b"a"[..], &b"b"[..]));
    let r = fields(bytes(&top, 4));
    assert_eq!(
        [1, 2, 3, 4, 5].map(|n| varint(&r, n)),
        [100_000, 50_000, 2, 1 << 20, 7]
    );
    assert_eq!((bytes(&r, 6), bytes(&r, 7)), (&b"0-1"[..], &b"0"[..]));
    assert_eq!(varint(&r, 10), 1 << 21);
    assert_eq!(bytes(&top, 8), b"/kubepods/besteffort/podu1");
    let env = fields(bytes(&top, 9));
    assert_eq!((bytes(&env, 1), bytes(&env, 2)), (&b"E"[..], &b"1"[..]));
    assert_eq!(SERVICE_NAME, "runtime.v1alpha1.RuntimeHookService");
}

#[test]
fn pod_hook_responses_match_koordinators_field_numbers() {
    let resp = proto::PodSandboxHookResponse {
        labels: [("l".to_string(), "1".to_string())].into(),
        annotations: [("a".to_string(), "2".to_string())].into(),
        cgroup_parent: "/kubepods/pod1".into(),
        resources: Some(proto::LinuxContainerResources {
            cpu_shares: 1024,
            ..Default::default()
        }),
    };
    let top = fields(&resp.encode_to_vec());
    assert_eq!(bytes(&fields(bytes(&top, 1)), 2), b"1");
    assert_eq!(bytes(&fields(bytes(&top, 2)), 2), b"2");
    assert_eq!(bytes(&top, 3), b"/kubepods/pod1");
    assert_eq!(varint(&fields(bytes(&top, 4)), 3), 1024);
}
