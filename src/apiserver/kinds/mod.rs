//! kube-apiserver's validation of the built-in kinds koord's roles and controllers write
//! besides pods — RBAC roles and bindings (`pkg/apis/rbac/validation`), leases
//! (`pkg/apis/coordination/validation`), events (`pkg/apis/core/validation/events.go`) and
//! admission webhook configurations (`pkg/apis/admissionregistration/validation`): every
//! cause at once, with kube's field paths and wording (a Go value is shown as kube's `%#v`
//! shows it).

use serde_json::Value;

mod webhook;

use super::cause::{Cause, quote};
use crate::api::names::{DNS_SUBDOMAIN, dns_subdomain, qualified_name};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn strs(v: Option<&Value>) -> Vec<&str> {
    let items = v.and_then(Value::as_array).into_iter().flatten();
    items.filter_map(Value::as_str).collect()
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn owned(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Go's `%#v` of a `[]string`.
fn go_strings(list: &[&str]) -> String {
    let quoted: Vec<String> = list.iter().map(|s| quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// Every cause `obj` (of `group`/`resource`) breaks; `old` is the stored object of an
/// update.
pub fn causes(group: &str, resource: &str, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    match (group, resource) {
        (RBAC_GROUP, "roles") => role(obj, true),
        (RBAC_GROUP, "clusterroles") => role(obj, false),
        (RBAC_GROUP, "rolebindings") => binding(obj, old, true),
        (RBAC_GROUP, "clusterrolebindings") => binding(obj, old, false),
        ("coordination.k8s.io", "leases") => lease(obj),
        ("", "events") => event(&event_view(obj, &CORE_EVENT), false),
        ("events.k8s.io", "events") => event(&event_view(obj, &EVENTS_V1), true),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            webhook::causes(obj, true)
        }
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            webhook::causes(obj, false)
        }
        _ => Vec::new(),
    }
}

// ---- RBAC ----

fn policy_rule(out: &mut Vec<Cause>, rule: &Value, namespaced: bool, at: &str) {
    if strs(rule.get("verbs")).is_empty() {
        out.push(Cause::required(
            format!("{at}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = strs(rule.get("nonResourceURLs"));
    if !urls.is_empty() {
        let shown = go_strings(&urls);
        let field = format!("{at}.nonResourceURLs");
        if namespaced {
            let why = "namespaced rules cannot apply to non-resource URLs";
            out.push(Cause::invalid_shown(&field, &shown, why));
        }
        let mixed = ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|k| !strs(rule.get(*k)).is_empty());
        if mixed {
            let why = "rules cannot apply to both regular resources and non-resource URLs";
            out.push(Cause::invalid_shown(&field, &shown, why));
        }
        return;
    }
    if strs(rule.get("apiGroups")).is_empty() {
        out.push(Cause::required(
            format!("{at}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if strs(rule.get("resources")).is_empty() {
        out.push(Cause::required(
            format!("{at}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

fn role(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let rules = obj.get("rules").and_then(Value::as_array);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        policy_rule(&mut out, rule, namespaced, &format!("rules[{i}]"));
    }
    if let Some(agg) = obj.get("aggregationRule").filter(|a| !a.is_null()) {
        let selectors = agg.get("clusterRoleSelectors").and_then(Value::as_array);
        if selectors.is_none_or(|s| s.is_empty()) {
            out.push(Cause::required(
                "aggregationRule.clusterRoleSelectors",
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
    }
    out
}

/// kube's `ValidateRBACName` (a path segment).
fn path_segment(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    match name {
        "." => errs.push("may not be '.'"),
        ".." => errs.push("may not be '..'"),
        _ => {}
    }
    if name.contains('/') {
        errs.push("may not contain '/'");
    }
    if name.contains('%') {
        errs.push("may not contain '%'");
    }
    errs
}

fn role_ref_shown(r: &Value) -> String {
    format!(
        "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
        quote(str_at(r, "apiGroup")),
        quote(str_at(r, "kind")),
        quote(str_at(r, "name"))
    )
}

fn binding(obj: &Value, old: Option<&Value>, namespaced: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let r = obj.get("roleRef").cloned().unwrap_or(Value::Null);
    let group = str_at(&r, "apiGroup");
    if group != RBAC_GROUP {
        out.push(Cause::not_supported(
            "roleRef.apiGroup",
            &group.into(),
            &owned(&[RBAC_GROUP]),
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = str_at(&r, "kind");
    if !kinds.contains(&kind) {
        out.push(Cause::not_supported(
            "roleRef.kind",
            &kind.into(),
            &owned(kinds),
        ));
    }
    let name = str_at(&r, "name");
    if name.is_empty() {
        out.push(Cause::required("roleRef.name", ""));
    }
    for msg in path_segment(name) {
        out.push(Cause::invalid("roleRef.name", &name.into(), msg));
    }
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, s) in subjects.into_iter().flatten().enumerate() {
        subject(&mut out, s, namespaced, &format!("subjects[{i}]"));
    }
    if let Some(before) = old.and_then(|o| o.get("roleRef"))
        && *before != r
    {
        out.push(Cause::invalid_shown(
            "roleRef",
            &role_ref_shown(&r),
            "cannot change roleRef",
        ));
    }
    out
}

fn subject(out: &mut Vec<Cause>, s: &Value, namespaced: bool, at: &str) {
    let name = str_at(s, "name");
    if name.is_empty() {
        out.push(Cause::required(format!("{at}.name"), ""));
    }
    let group = str_at(s, "apiGroup");
    let rbac_group = || {
        Cause::not_supported(
            format!("{at}.apiGroup"),
            &group.into(),
            &owned(&[RBAC_GROUP]),
        )
    };
    match str_at(s, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() && !dns_subdomain(name) {
                out.push(Cause::invalid(
                    format!("{at}.name"),
                    &name.into(),
                    DNS_SUBDOMAIN,
                ));
            }
            if !group.is_empty() {
                let c =
                    Cause::not_supported(format!("{at}.apiGroup"), &group.into(), &owned(&[""]));
                out.push(c);
            }
            if !namespaced && str_at(s, "namespace").is_empty() {
                out.push(Cause::required(format!("{at}.namespace"), ""));
            }
        }
        "User" | "Group" if group != RBAC_GROUP => out.push(rbac_group()),
        "User" | "Group" => {}
        other => out.push(Cause::not_supported(
            format!("{at}.kind"),
            &other.into(),
            &owned(&["ServiceAccount", "User", "Group"]),
        )),
    }
}

/// kube's defaulting of RBAC v1 bindings on decode: `roleRef.apiGroup`, and each
/// subject's `apiGroup` by its kind.
pub fn default_binding(obj: &mut Value) {
    if let Some(r) = obj.get_mut("roleRef").and_then(Value::as_object_mut)
        && r.get("apiGroup")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        r.insert("apiGroup".into(), RBAC_GROUP.into());
    }
    let subjects = obj.get_mut("subjects").and_then(Value::as_array_mut);
    for s in subjects.into_iter().flatten() {
        let Some(m) = s.as_object_mut() else { continue };
        if m.get("apiGroup")
            .and_then(Value::as_str)
            .is_some_and(|g| !g.is_empty())
        {
            continue;
        }
        let group = match m.get("kind").and_then(Value::as_str) {
            Some("ServiceAccount") => "",
            Some("User" | "Group") => RBAC_GROUP,
            _ => continue,
        };
        m.insert("apiGroup".into(), group.into());
    }
}

// ---- Lease ----

fn lease(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(d) = spec.get("leaseDurationSeconds").and_then(Value::as_i64)
        && d <= 0
    {
        let c = Cause::invalid(
            "spec.leaseDurationSeconds",
            &d.into(),
            "must be greater than 0",
        );
        out.push(c);
    }
    if let Some(t) = spec.get("leaseTransitions").and_then(Value::as_i64)
        && t < 0
    {
        let why = "must be greater than or equal to 0";
        out.push(Cause::invalid("spec.leaseTransitions", &t.into(), why));
    }
    out
}

// ---- Events ----

/// The fields kube's event validation reads, under the internal type's names.
struct EventView<'a> {
    namespace: &'a str,
    involved_namespace: &'a str,
    has_event_time: bool,
    reporting_controller: &'a str,
    reporting_instance: &'a str,
    action: &'a str,
    reason: &'a str,
    message: &'a str,
    type_: &'a str,
    has_first: bool,
    has_last: bool,
    count: i64,
    source: bool,
    series: Option<&'a Value>,
}

fn set(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null() && x != "")
}

/// Where an Event's API version keeps the fields the validation reads.
struct EventFields {
    involved: &'static str,
    reporter: &'static str,
    message: &'static str,
    first: &'static str,
    last: &'static str,
    count: &'static str,
    source: &'static str,
}

const CORE_EVENT: EventFields = EventFields {
    involved: "/involvedObject/namespace",
    reporter: "reportingComponent",
    message: "message",
    first: "firstTimestamp",
    last: "lastTimestamp",
    count: "count",
    source: "source",
};

const EVENTS_V1: EventFields = EventFields {
    involved: "/regarding/namespace",
    reporter: "reportingController",
    message: "note",
    first: "deprecatedFirstTimestamp",
    last: "deprecatedLastTimestamp",
    count: "deprecatedCount",
    source: "deprecatedSource",
};

fn event_view<'a>(v: &'a Value, f: &EventFields) -> EventView<'a> {
    let source = v.get(f.source).cloned().unwrap_or(Value::Null);
    let ptr = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
    EventView {
        namespace: ptr("/metadata/namespace"),
        involved_namespace: ptr(f.involved),
        has_event_time: set(v, "eventTime"),
        reporting_controller: str_at(v, f.reporter),
        reporting_instance: str_at(v, "reportingInstance"),
        action: str_at(v, "action"),
        reason: str_at(v, "reason"),
        message: str_at(v, f.message),
        type_: str_at(v, "type"),
        has_first: set(v, f.first),
        has_last: set(v, f.last),
        count: v.get(f.count).and_then(Value::as_i64).unwrap_or(0),
        source: set(&source, "component") || set(&source, "host"),
        series: v.get("series").filter(|s| !s.is_null()),
    }
}

fn at_most(out: &mut Vec<Cause>, field: &str, text: &str, limit: usize) {
    if text.len() > limit {
        let why = format!("can have at most {limit} characters");
        out.push(Cause::invalid(field, &"".into(), &why));
    }
}

fn event(e: &EventView<'_>, strict: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let mismatch = |out: &mut Vec<Cause>| {
        out.push(Cause::invalid(
            "involvedObject.namespace",
            &e.involved_namespace.into(),
            "does not match event.namespace",
        ))
    };
    if !e.has_event_time {
        let agrees = if e.involved_namespace.is_empty() {
            e.namespace.is_empty() || e.namespace == "default"
        } else {
            e.namespace == e.involved_namespace
        };
        if !agrees {
            mismatch(&mut out);
        }
    } else {
        if e.involved_namespace.is_empty() && !matches!(e.namespace, "default" | "kube-system") {
            mismatch(&mut out);
        }
        if e.reporting_controller.is_empty() {
            out.push(Cause::required("reportingController", ""));
        }
        for msg in qualified_name(e.reporting_controller) {
            let c = Cause::invalid("reportingController", &e.reporting_controller.into(), &msg);
            out.push(c);
        }
        for (field, text) in [
            ("reportingInstance", e.reporting_instance),
            ("action", e.action),
            ("reason", e.reason),
        ] {
            if text.is_empty() {
                out.push(Cause::required(field, ""));
            }
            at_most(&mut out, field, text, 128);
        }
        at_most(&mut out, "message", e.message, 1024);
    }
    if !dns_subdomain(e.namespace) {
        out.push(Cause::invalid(
            "namespace",
            &e.namespace.into(),
            DNS_SUBDOMAIN,
        ));
    }
    if strict {
        strict_event(&mut out, e);
    }
    out
}

/// What events.k8s.io/v1 adds for new writers.
fn strict_event(out: &mut Vec<Cause>, e: &EventView<'_>) {
    if let Some(s) = e.series {
        if s.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            out.push(Cause::invalid(
                "series.count",
                &"".into(),
                "should be at least 2",
            ));
        }
        if !set(s, "lastObservedTime") {
            out.push(Cause::required("series.lastObservedTime", ""));
        }
    }
    if !e.has_event_time {
        out.push(Cause::required("eventTime", ""));
    }
    if !matches!(e.type_, "Normal" | "Warning") {
        let why = format!("has invalid value: {}", e.type_);
        out.push(Cause::invalid("type", &"".into(), &why));
    }
    for (field, wrong) in [
        ("firstTimestamp", e.has_first),
        ("lastTimestamp", e.has_last),
        ("count", e.count != 0),
        ("source", e.source),
    ] {
        if wrong {
            out.push(Cause::invalid(field, &"".into(), "needs to be unset"));
        }
    }
}

#[cfg(test)]
mod tests;
