//! koord's CRDs (`koord crds`) against the ones Koordinator's chart v1.8.0 installs
//! (tests/fixtures/koordinator/crds), field by field: names, scope, versions (served,
//! storage), subresources, printer columns and every schema keyword but `description`.
//! A difference fails unless it is one of the fields koord adds, each named in the
//! "CRD fields koord adds" table of docs/deploying.md — and each of those must still be a
//! difference.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/koordinator/crds"
);

/// Fields koord's CRDs have and the chart's lack: (CRD, schema path with `*` for any one
/// property name). Each is in Koordinator's master branch after v1.8.0.
const ADDED: &[(&str, &str)] = &[
    (
        "nodeslos.slo.koordinator.sh",
        "spec.resourceQOSStrategy.*.memoryQOS.pageCacheEnable",
    ),
    (
        "nodeslos.slo.koordinator.sh",
        "spec.resourceQOSStrategy.*.memoryQOS.pageCacheLimitPercent",
    ),
    (
        "nodeslos.slo.koordinator.sh",
        "spec.resourceQOSStrategy.*.memoryQOS.pageCacheLimitSize",
    ),
    (
        "nodeslos.slo.koordinator.sh",
        "spec.resourceQOSStrategy.*.memoryQOS.pageCacheReclaimSync",
    ),
    (
        "nodeslos.slo.koordinator.sh",
        "spec.systemStrategy.pageCacheLimitEnabled",
    ),
    (
        "nodemetrics.slo.koordinator.sh",
        "status.nodeMetric.numaUsages",
    ),
    ("nodemetrics.slo.koordinator.sh", "status.prodPeakMetric"),
];

fn chart() -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(FIXTURES).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if let Some(name) = v.pointer("/metadata/name").and_then(Value::as_str) {
                out.insert(name.to_string(), v);
            }
        }
    }
    out
}

fn koord() -> BTreeMap<String, Value> {
    koord::api::crds::all()
        .into_iter()
        .map(|c| {
            let v = serde_json::to_value(&c).unwrap();
            (c.metadata.name.unwrap(), v)
        })
        .collect()
}

/// Every difference between `a` (chart) and `b` (koord) under `path`, descriptions aside.
fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys.into_iter().filter(|k| *k != "description") {
                let p = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(v), Some(w)) => diff(v, w, &p, out),
                    (Some(v), None) => out.push(format!("{p}: only the chart's ({v})")),
                    (None, Some(_)) => out.push(format!("{p}: only koord's")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if path.ends_with(".required") => {
            let (mut x, mut y) = (x.clone(), y.clone());
            x.sort_by_key(|v| v.to_string());
            y.sort_by_key(|v| v.to_string());
            if x != y {
                out.push(format!("{path}: chart {a}, koord {b}"));
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff(v, w, &format!("{path}[{i}]"), out);
            }
        }
        // `minimum: 0` in the chart's YAML, `0.0` from k8s-openapi's f64: the same bound.
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => {}
        _ if a != b => out.push(format!("{path}: chart {a}, koord {b}")),
        _ => {}
    }
}

/// The differences of one CRD: spec fields, then each version by name.
fn crd_diff(name: &str, a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for k in ["group", "scope", "names", "conversion"] {
        let (x, y) = (&a["spec"][k], &b["spec"][k]);
        diff(x, y, &format!("{name}: spec.{k}"), &mut out);
    }
    let versions = |v: &Value| -> BTreeMap<String, Value> {
        v["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| (v["name"].as_str().unwrap_or("").to_string(), v.clone()))
            .collect()
    };
    let (va, vb) = (versions(a), versions(b));
    for v in va
        .keys()
        .chain(vb.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let p = format!("{name}: {v}");
        match (va.get(v), vb.get(v)) {
            (Some(x), Some(y)) => diff(x, y, &p, &mut out),
            (Some(_), None) => out.push(format!("{p}: version only the chart's")),
            _ => out.push(format!("{p}: version only koord's")),
        }
    }
    out
}

/// The schema path of a difference (`…properties.a.properties.b` → `a.b`).
fn field_of(d: &str) -> Option<String> {
    let at = d.find(".schema.openAPIV3Schema.")?;
    let rest = &d[at + ".schema.openAPIV3Schema.".len()..];
    let rest = rest.split(':').next()?;
    Some(
        rest.split('.')
            .filter(|s| *s != "properties")
            .collect::<Vec<_>>()
            .join("."),
    )
}

fn matches(pattern: &str, field: &str) -> bool {
    let (p, f): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), field.split('.').collect());
    p.len() == f.len() && p.iter().zip(&f).all(|(p, f)| *p == "*" || p == f)
}

#[test]
fn koords_crds_are_the_charts() {
    let (chart, koord) = (chart(), koord());
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        koord.keys().collect::<Vec<_>>(),
        "the same CRDs"
    );
    let mut unexplained = Vec::new();
    let mut used = vec![false; ADDED.len()];
    for (name, a) in &chart {
        for d in crd_diff(name, a, &koord[name]) {
            let added = field_of(&d)
                .filter(|_| d.ends_with("only koord's"))
                .and_then(|f| {
                    ADDED
                        .iter()
                        .position(|(crd, p)| crd == name && matches(p, &f))
                });
            match added {
                Some(i) => used[i] = true,
                None => unexplained.push(d),
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "{} differences from the chart's CRDs:\n{}",
        unexplained.len(),
        unexplained.join("\n")
    );
    let stale: Vec<_> = ADDED
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(a, _)| a)
        .collect();
    assert!(stale.is_empty(), "no longer different: {stale:?}");
}

/// Each added field is named on the deploying page, where a chart user looks.
#[test]
fn the_deploying_page_names_every_field_koord_adds() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/deploying.md");
    let page = std::fs::read_to_string(page).unwrap();
    let section = page
        .split("CRD fields koord adds")
        .nth(1)
        .expect("a \"CRD fields koord adds\" section")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    for (_, path) in ADDED {
        let leaf = path.rsplit('.').next().unwrap();
        assert!(
            section.contains(leaf),
            "docs/deploying.md does not name `{leaf}`"
        );
    }
}
