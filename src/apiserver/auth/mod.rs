//! Who is asking and what they ask for, as kube-apiserver sees a request: the user behind
//! a bearer token (the admin token of `--embedded`, or a ServiceAccount token this server
//! signed), impersonation (`kubectl --as`), and the request's attributes (verb, API group,
//! resource, subresource, namespace, name, or a non-resource path) that RBAC decides on.

pub mod aggregate;
pub mod escalation;
pub mod policy;
pub mod rbac;
pub mod review;
pub mod token;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::store::Store;

pub const MASTERS: &str = "system:masters";
pub const AUTHENTICATED: &str = "system:authenticated";
pub const ADMIN_USER: &str = "koord-admin";

#[derive(Debug, Clone, PartialEq, Default)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// The holder of the embedded server's admin token.
    pub fn admin() -> User {
        User {
            name: ADMIN_USER.into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            ..User::default()
        }
    }

    /// A ServiceAccount's user, in kube's groups.
    pub fn service_account(ns: &str, name: &str, uid: &str) -> User {
        User {
            name: token::sa_user(ns, name),
            uid: uid.into(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                AUTHENTICATED.into(),
            ],
            ..User::default()
        }
    }

    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// `userInfo` as TokenReview and SelfSubjectReview show it.
    pub fn to_json(&self) -> Value {
        let mut u = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            u["uid"] = self.uid.clone().into();
        }
        if !self.extra.is_empty() {
            u["extra"] = json!(self.extra);
        }
        u
    }
}

/// What a request asks to do, as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Attributes {
    pub verb: String,
    pub resource_request: bool,
    pub api_group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The request path, for non-resource requests.
    pub path: String,
}

impl Attributes {
    pub fn resource(verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> Self {
        let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
        Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            path: String::new(),
        }
    }

    pub fn non_resource(verb: &str, path: &str) -> Self {
        Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Attributes::default()
        }
    }

    /// kube's RequestInfo of a request: `/api/v1/...` and `/apis/<g>/<v>/...` with a
    /// resource are resource requests; discovery and every other path are not.
    pub fn of_request(method: &hyper::Method, path: &str, watch_param: bool) -> Attributes {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, rest) = match segs.as_slice() {
            ["api", _v, rest @ ..] if !rest.is_empty() => ("", rest),
            ["apis", g, _v, rest @ ..] if !rest.is_empty() => (*g, rest),
            _ => return Attributes::non_resource(&non_resource_verb(method), path),
        };
        let (watch, rest) = match rest {
            ["watch", tail @ ..] => (true, tail),
            _ => (false, rest),
        };
        let mut ns = "";
        let mut parts = rest;
        if let ["namespaces", n, tail @ ..] = rest {
            ns = n;
            if !tail.is_empty() && !matches!(tail[0], "status" | "finalize") {
                parts = tail;
            }
        }
        let resource = parts.first().copied().unwrap_or("");
        let name = parts.get(1).copied().unwrap_or("");
        let sub = parts.get(2).copied().unwrap_or("");
        let verb = resource_verb(method, !name.is_empty(), watch || watch_param, sub);
        Attributes {
            verb,
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            path: path.into(),
        }
    }

    /// `pods`, `pods/status`.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// kube's `forbiddenMessage`.
    pub fn forbidden_message(&self, user: &str) -> String {
        let user = crate::apiserver::cause::quote(user);
        if !self.resource_request {
            return format!("User {user} cannot {} path {:?}", self.verb, self.path);
        }
        let what = format!(
            "User {user} cannot {} resource {:?} in API group {:?}",
            self.verb,
            self.combined_resource(),
            self.api_group
        );
        if self.namespace.is_empty() {
            format!("{what} at the cluster scope")
        } else {
            format!("{what} in the namespace {:?}", self.namespace)
        }
    }
}

fn non_resource_verb(m: &hyper::Method) -> String {
    m.as_str().to_ascii_lowercase()
}

fn resource_verb(m: &hyper::Method, named: bool, watch: bool, sub: &str) -> String {
    use hyper::Method;
    let v = match *m {
        Method::GET | Method::HEAD if watch => "watch",
        // kube authorizes a WebSocket exec (a GET) as the create it is.
        Method::GET if sub == "exec" || sub == "attach" || sub == "portforward" => "create",
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => return m.as_str().to_ascii_lowercase(),
    };
    v.to_string()
}

/// Turns credentials into users.
pub struct Authenticator {
    /// The admin token; without one every request is the admin (an in-process test
    /// server with no token configured).
    pub admin_token: Option<String>,
    pub signer: token::Signer,
}

impl Authenticator {
    /// The user of a request's headers; `None` is a 401.
    pub fn authenticate(&self, headers: &hyper::HeaderMap, store: &Store) -> Option<User> {
        let given = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match (given, &self.admin_token) {
            (None, None) => Some(User::admin()),
            (None, Some(_)) => None,
            (Some(t), Some(admin)) if constant_eq(t, admin) => Some(User::admin()),
            (Some(t), None) if !t.contains('.') => Some(User::admin()),
            (Some(t), _) => self.service_account(t, &[token::ISSUER.to_string()], store),
        }
    }

    /// A ServiceAccount token's user, while the ServiceAccount (and the pod or secret
    /// the token is bound to) still exists with the uid the token names.
    pub fn service_account(&self, t: &str, audiences: &[String], store: &Store) -> Option<User> {
        let c = self.signer.verify(t, audiences)?;
        let ns = &c.kube.namespace;
        let exists = |resource: &str, r: &token::Ref| {
            let key = (String::new(), resource.to_string());
            store.get(&key, ns, &r.name).is_some_and(|o| {
                o.value().pointer("/metadata/uid").and_then(Value::as_str) == Some(&r.uid)
            })
        };
        if !exists("serviceaccounts", &c.kube.serviceaccount) {
            return None;
        }
        if c.kube.pod.as_ref().is_some_and(|p| !exists("pods", p))
            || c.kube
                .secret
                .as_ref()
                .is_some_and(|s| !exists("secrets", s))
        {
            return None;
        }
        let mut user =
            User::service_account(ns, &c.kube.serviceaccount.name, &c.kube.serviceaccount.uid);
        if let Some(p) = &c.kube.pod {
            user.extra.insert(
                "authentication.kubernetes.io/pod-name".into(),
                vec![p.name.clone()],
            );
            user.extra.insert(
                "authentication.kubernetes.io/pod-uid".into(),
                vec![p.uid.clone()],
            );
        }
        user.extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![format!("JTI={}", c.jti)],
        );
        Some(user)
    }
}

fn constant_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The user a request acts as under `Impersonate-*` headers, and the permissions each
/// impersonation needs (`impersonate` on users, groups, serviceaccounts, uids,
/// userextras/<key>) — checked by the caller with the real user's rights.
pub fn impersonation(headers: &hyper::HeaderMap) -> Option<(User, Vec<Attributes>)> {
    let get_all = |h: &str| -> Vec<String> {
        headers
            .get_all(h)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect()
    };
    let name = get_all("impersonate-user").into_iter().next()?;
    let mut checks = Vec::new();
    let mut user = match name
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, sa)) => {
            checks.push(Attributes::resource(
                "impersonate",
                "",
                "serviceaccounts",
                ns,
                sa,
            ));
            User::service_account(ns, sa, "")
        }
        None => {
            checks.push(Attributes::resource("impersonate", "", "users", "", &name));
            User {
                name: name.clone(),
                groups: vec![AUTHENTICATED.into()],
                ..User::default()
            }
        }
    };
    for g in get_all("impersonate-group") {
        checks.push(Attributes::resource("impersonate", "", "groups", "", &g));
        if !user.groups.contains(&g) {
            user.groups.insert(0, g);
        }
    }
    if let Some(uid) = get_all("impersonate-uid").into_iter().next() {
        checks.push(Attributes::resource(
            "impersonate",
            "authentication.k8s.io",
            "uids",
            "",
            &uid,
        ));
        user.uid = uid;
    }
    for (k, v) in headers.iter() {
        if let Some(key) = k.as_str().strip_prefix("impersonate-extra-")
            && let Ok(v) = v.to_str()
        {
            let res = format!("userextras/{key}");
            checks.push(Attributes::resource(
                "impersonate",
                "authentication.k8s.io",
                &res,
                "",
                v,
            ));
            user.extra
                .entry(key.to_string())
                .or_default()
                .push(v.to_string());
        }
    }
    Some((user, checks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::Method;

    // kube's TestGetAPIRequestInfo, the cases a role's requests take.
    #[test]
    fn request_info_as_kube_parses_it() {
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces",
                false,
                "list",
                "",
                "namespaces",
                "",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other",
                false,
                "get",
                "",
                "namespaces",
                "other",
                "other",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods/foo",
                false,
                "get",
                "",
                "pods",
                "other",
                "foo",
                "",
            ),
            (
                Method::GET,
                "/api/v1/pods",
                false,
                "list",
                "",
                "pods",
                "",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/pods",
                true,
                "watch",
                "",
                "pods",
                "",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/other/pods",
                false,
                "watch",
                "",
                "pods",
                "other",
                "",
                "",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/other/pods/foo/binding",
                false,
                "create",
                "",
                "pods",
                "other",
                "foo",
                "binding",
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/other/finalize",
                false,
                "update",
                "",
                "namespaces",
                "other",
                "other",
                "finalize",
            ),
            (
                Method::PATCH,
                "/apis/slo.koordinator.sh/v1alpha1/nodeslos/n/status",
                false,
                "patch",
                "slo.koordinator.sh",
                "nodeslos",
                "",
                "n",
                "status",
            ),
            (
                Method::DELETE,
                "/apis/batch/v1/namespaces/x/jobs",
                false,
                "deletecollection",
                "batch",
                "jobs",
                "x",
                "",
                "",
            ),
        ];
        for (m, path, watch, verb, group, res, ns, name, sub) in cases {
            let a = Attributes::of_request(&m, path, watch);
            assert!(a.resource_request, "{path}");
            assert_eq!(
                (
                    a.verb.as_str(),
                    a.api_group.as_str(),
                    a.resource.as_str(),
                    a.namespace.as_str(),
                    a.name.as_str(),
                    a.subresource.as_str()
                ),
                (verb, group, res, ns, name, sub),
                "{m} {path}"
            );
        }
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps/v1",
            "/version",
            "/openapi/v2",
        ] {
            let a = Attributes::of_request(&Method::GET, path, false);
            assert!(!a.resource_request && a.verb == "get", "{path}");
        }
    }

    #[test]
    fn forbidden_messages_read_as_kube_writes_them() {
        let a = Attributes::resource("list", "batch", "jobs", "", "");
        assert_eq!(
            a.forbidden_message("system:serviceaccount:koordinator-system:koord-descheduler"),
            "User \"system:serviceaccount:koordinator-system:koord-descheduler\" cannot list resource \"jobs\" in API group \"batch\" at the cluster scope"
        );
        let a = Attributes::resource("get", "", "pods/log", "x", "p");
        assert_eq!(
            a.forbidden_message("u"),
            "User \"u\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"x\""
        );
        let a = Attributes::non_resource("get", "/metrics");
        assert_eq!(
            a.forbidden_message("u"),
            "User \"u\" cannot get path \"/metrics\""
        );
    }
}
