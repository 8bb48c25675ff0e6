//! LowNodeLoad as a framework plugin: built from its args, run over the profile's nodes with
//! its own pod filter (evictableNamespaces, podSelectors) in front of the profile's evictor,
//! and its `dryRun` deciding without evicting.

use serde_json::Value;

use super::args::{Args, RawArgs};
use super::balance::Candidate;
use super::classify::NodeLoad;
use super::pass::LowNodeLoad;
use crate::api::field::FieldError;
use crate::descheduler::framework::plugin::{Act, Env, Plugin};
use crate::descheduler::framework::podview::PodView;

/// LowNodeLoad from its args; the detector cache lasts at least one descheduling interval.
pub fn plugin(args: &Value, interval: std::time::Duration) -> Result<LowNodeLoad, FieldError> {
    let raw: RawArgs = if args.is_null() {
        RawArgs::default()
    } else {
        serde_json::from_value(args.clone()).map_err(|e| FieldError::whole(e.to_string()))?
    };
    let mut a = Args::new(raw)?;
    if !interval.is_zero() && a.detector_cache_timeout < interval {
        a.detector_cache_timeout = interval;
    }
    Ok(LowNodeLoad::new(a))
}

impl Plugin for LowNodeLoad {
    fn name(&self) -> &'static str {
        "LowNodeLoad"
    }

    fn run(&mut self, env: &Env, act: &mut dyn Act) {
        let args = self.args.clone();
        let dry = args.dry_run;
        let cell = std::cell::RefCell::new(act);
        let filter = |p: &PodView| own_filter(&args, p) && cell.borrow_mut().filter(p, true);
        let mut evict =
            |c: &Candidate, _: &NodeLoad, why: &str| dry || cell.borrow_mut().evict(&c.pod, why);
        let out = self.balance(env.inputs, env.now_ms, &filter, &mut evict);
        let act = cell.into_inner();
        for r in out.nodes {
            act.report_node(r);
        }
    }
}

/// LowNodeLoad's own pod filter: evictableNamespaces and podSelectors.
fn own_filter(a: &Args, p: &PodView) -> bool {
    let ns_ok = a.namespaces.allows(&p.namespace);
    let sel_ok = a.pod_selectors.is_empty()
        || a.pod_selectors.iter().any(|s| {
            s.selector.as_ref().is_none_or(|ls| {
                crate::api::selector::label_selector_matches(Some(ls), p.labels_map().as_ref())
            })
        });
    ns_ok && sel_ok
}
