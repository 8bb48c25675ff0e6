//! Admission webhook configurations, as `pkg/apis/admissionregistration/validation` checks
//! them for `admissionregistration.k8s.io/v1`.

use std::collections::HashSet;

use serde_json::Value;

use super::{go_strings, owned, str_at, strs};
use crate::api::names::{DNS_SUBDOMAIN, dns_subdomain};
use crate::apiserver::cause::Cause;

const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn dns1035(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1] != b'-'
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fn one_of(out: &mut Vec<Cause>, field: String, v: Option<&Value>, allowed: &[&str]) {
    if let Some(x) = v.filter(|x| !x.is_null())
        && !x.as_str().is_some_and(|s| allowed.contains(&s))
    {
        out.push(Cause::not_supported(field, x, &owned(allowed)));
    }
}

/// Every cause of a Mutating (`mutating`) or ValidatingWebhookConfiguration.
pub fn causes(obj: &Value, mutating: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    let hooks = obj.get("webhooks").and_then(Value::as_array);
    for (i, hook) in hooks.into_iter().flatten().enumerate() {
        let at = format!("webhooks[{i}]");
        let name = str_at(hook, "name");
        if !names.insert(name) {
            out.push(Cause::duplicate(format!("{at}.name"), &name.into()));
        }
        webhook(&mut out, hook, &at, mutating);
    }
    out
}

fn webhook(out: &mut Vec<Cause>, hook: &Value, at: &str, mutating: bool) {
    fully_qualified(out, &format!("{at}.name"), str_at(hook, "name"));
    let rules = hook.get("rules").and_then(Value::as_array);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        rule_with_operations(out, rule, &format!("{at}.rules[{i}]"));
    }
    let field = |k: &str| format!("{at}.{k}");
    one_of(
        out,
        field("failurePolicy"),
        hook.get("failurePolicy"),
        &["Fail", "Ignore"],
    );
    one_of(
        out,
        field("matchPolicy"),
        hook.get("matchPolicy"),
        &["Equivalent", "Exact"],
    );
    if mutating {
        let allowed = ["IfNeeded", "Never"];
        one_of(
            out,
            field("reinvocationPolicy"),
            hook.get("reinvocationPolicy"),
            &allowed,
        );
    }
    let classes = ["None", "NoneOnDryRun"];
    match hook.get("sideEffects").filter(|s| !s.is_null()) {
        None => out.push(Cause::required(
            field("sideEffects"),
            &format!("must specify one of {}", classes.join(", ")),
        )),
        s => one_of(out, field("sideEffects"), s, &classes),
    }
    review_versions(
        out,
        hook.get("admissionReviewVersions"),
        &field("admissionReviewVersions"),
    );
    if let Some(t) = hook.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        let why = "the timeout value must be between 1 and 30 seconds";
        out.push(Cause::invalid(field("timeoutSeconds"), &t.into(), why));
    }
    client_config(out, hook.get("clientConfig"), &field("clientConfig"));
}

/// kube's `IsFullyQualifiedName`.
fn fully_qualified(out: &mut Vec<Cause>, field: &str, name: &str) {
    if name.is_empty() {
        out.push(Cause::required(field, ""));
        return;
    }
    if !dns_subdomain(name) {
        out.push(Cause::invalid(field, &name.into(), DNS_SUBDOMAIN));
    }
    if name.split('.').count() < 3 {
        let why = "should be a domain with at least three segments separated by dots";
        out.push(Cause::invalid(field, &name.into(), why));
    }
}

/// A list that must not be empty and may hold `*` only alone.
fn listed(out: &mut Vec<Cause>, rule: &Value, key: &str, at: &str, what: &str) {
    let items = strs(rule.get(key));
    let field = format!("{at}.{key}");
    if items.is_empty() {
        out.push(Cause::required(&field, ""));
    }
    if items.len() > 1 && items.contains(&"*") {
        let why = format!("if '*' is present, must not specify other {what}");
        out.push(Cause::invalid_shown(&field, &go_strings(&items), &why));
    }
}

fn rule_with_operations(out: &mut Vec<Cause>, rule: &Value, at: &str) {
    listed(out, rule, "operations", at, "operations");
    for (i, op) in strs(rule.get("operations")).into_iter().enumerate() {
        if !OPERATIONS.contains(&op) {
            let field = format!("{at}.operations[{i}]");
            out.push(Cause::not_supported(field, &op.into(), &owned(OPERATIONS)));
        }
    }
    listed(out, rule, "apiGroups", at, "API groups");
    listed(out, rule, "apiVersions", at, "API versions");
    for (i, v) in strs(rule.get("apiVersions")).into_iter().enumerate() {
        if v.is_empty() {
            out.push(Cause::required(format!("{at}.apiVersions[{i}]"), ""));
        }
    }
    if strs(rule.get("resources")).is_empty() {
        out.push(Cause::required(format!("{at}.resources"), ""));
    }
    let scopes = ["*", "Cluster", "Namespaced"];
    one_of(out, format!("{at}.scope"), rule.get("scope"), &scopes);
}

fn review_versions(out: &mut Vec<Cause>, v: Option<&Value>, field: &str) {
    let versions = strs(v);
    if versions.is_empty() {
        let why = format!("must specify one of {}", REVIEW_VERSIONS.join(", "));
        out.push(Cause::required(field, &why));
        return;
    }
    let mut seen = HashSet::new();
    for (i, version) in versions.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if !seen.insert(*version) {
            out.push(Cause::invalid(at, &(*version).into(), "duplicate version"));
            continue;
        }
        if !dns1035(version) {
            out.push(Cause::invalid(at, &(*version).into(), DNS1035));
        }
    }
    if !versions.iter().any(|v| REVIEW_VERSIONS.contains(v)) {
        let why = format!(
            "must include at least one of {}",
            REVIEW_VERSIONS.join(", ")
        );
        out.push(Cause::invalid_shown(field, &go_strings(&versions), &why));
    }
}

fn client_config(out: &mut Vec<Cause>, cc: Option<&Value>, at: &str) {
    let cc = cc.cloned().unwrap_or(Value::Null);
    let url = cc.get("url").and_then(Value::as_str);
    let service = cc.get("service").filter(|s| !s.is_null());
    match (url, service) {
        (Some(u), None) => webhook_url(out, &format!("{at}.url"), u),
        (None, Some(s)) => webhook_service(out, s, &format!("{at}.service")),
        _ => out.push(Cause::required(
            at,
            "exactly one of url or service is required",
        )),
    }
}

/// kube's `ValidateWebhookURL` with HTTPS required.
fn webhook_url(out: &mut Vec<Cause>, field: &str, url: &str) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        out.push(Cause::invalid(field, &url.into(), "host must be specified"));
    }
    if scheme != "https" {
        let why = "'https' is the only allowed URL scheme";
        out.push(Cause::invalid(field, &scheme.into(), why));
    }
    if authority.contains('@') {
        let why = "user information is not permitted in the URL";
        out.push(Cause::invalid(field, &url.into(), why));
    }
    if rest.contains('#') {
        let why = "fragments are not permitted in the URL";
        out.push(Cause::invalid(field, &url.into(), why));
    }
    if rest.split('#').next().unwrap_or("").contains('?') {
        let why = "query parameters are not permitted in the URL";
        out.push(Cause::invalid(field, &url.into(), why));
    }
}

/// kube's `ValidateWebhookService`.
fn webhook_service(out: &mut Vec<Cause>, s: &Value, at: &str) {
    if str_at(s, "name").is_empty() {
        out.push(Cause::required(
            format!("{at}.name"),
            "service name is required",
        ));
    }
    if str_at(s, "namespace").is_empty() {
        out.push(Cause::required(
            format!("{at}.namespace"),
            "service namespace is required",
        ));
    }
    if let Some(p) = s.get("port").and_then(Value::as_i64)
        && !(1..=65535).contains(&p)
    {
        let why = "port is not valid: must be between 1 and 65535, inclusive";
        out.push(Cause::invalid(format!("{at}.port"), &p.into(), why));
    }
    if let Some(path) = s.get("path").and_then(Value::as_str) {
        service_path(out, &format!("{at}.path"), path);
    }
}

/// Each `/`-separated segment a DNS subdomain (one trailing `/` allowed).
fn service_path(out: &mut Vec<Cause>, field: &str, path: &str) {
    if path.is_empty() || path == "/" {
        return;
    }
    let shown: Value = path.into();
    if path == "//" {
        out.push(Cause::invalid(field, &shown, "segment[0] may not be empty"));
        return;
    }
    if !path.starts_with('/') {
        out.push(Cause::invalid(field, &shown, "must start with a '/'"));
    }
    let rest = path.get(1..).unwrap_or("");
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, step) in rest.split('/').enumerate() {
        if step.is_empty() {
            let why = format!("segment[{i}] may not be empty");
            out.push(Cause::invalid(field, &shown, &why));
        } else if !dns_subdomain(step) {
            let why = format!("segment[{i}]: {DNS_SUBDOMAIN}");
            out.push(Cause::invalid(field, &shown, &why));
        }
    }
}
