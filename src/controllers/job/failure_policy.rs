//! A Job's `podFailurePolicy` against one failed pod (kube's `matchPodFailurePolicy`): the
//! first rule whose `onExitCodes` (a terminated container with a non-zero exit code, of
//! the named container if any, `In` / `NotIn` the values) or `onPodConditions` (a pod
//! condition of that type and status) matches decides the action.

use k8s_openapi::api::batch::v1::{PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyRule};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// The action of the first matching rule and kube's message for it.
pub fn matching<'a>(rules: &'a [PodFailurePolicyRule], pod: &Pod) -> Option<(&'a str, String)> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    rules.iter().enumerate().find_map(|(i, rule)| {
        let action = rule.action.as_str();
        if let Some(req) = &rule.on_exit_codes {
            let c = exited(pod, req)?;
            let code = c.state.as_ref()?.terminated.as_ref()?.exit_code;
            return Some((
                action,
                format!(
                    "Container {} for pod {ns}/{name} failed with exit code {code} matching {action} rule at index {i}",
                    c.name
                ),
            ));
        }
        let conds = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
        rule.on_pod_conditions.iter().flatten().find_map(|want| {
            let status = if want.status.is_empty() { "True" } else { want.status.as_str() };
            let found = conds
                .into_iter()
                .flatten()
                .any(|c| c.type_ == want.type_ && c.status == status);
            found.then(|| {
                (
                    action,
                    format!(
                        "Pod {ns}/{name} has condition {} matching {action} rule at index {i}",
                        want.type_
                    ),
                )
            })
        })
    })
}

/// The first terminated container (init containers first) the requirement matches.
fn exited<'p>(
    pod: &'p Pod,
    req: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<&'p ContainerStatus> {
    let s = pod.status.as_ref()?;
    let all = s.init_container_statuses.iter().flatten();
    let mut all = all.chain(s.container_statuses.iter().flatten());
    all.find(|c| {
        let code = c
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code);
        let named = req.container_name.as_ref().is_none_or(|n| *n == c.name);
        let listed = code.is_some_and(|x| req.values.contains(&x));
        let op_ok = if req.operator == "NotIn" {
            !listed
        } else {
            listed
        };
        named && code.is_some_and(|x| x != 0) && op_ok
    })
}
