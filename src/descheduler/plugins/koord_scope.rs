//! What Koordinator's own Balance plugins (CustomPriority, FragmentationAware,
//! ScaleDownBinPack) share: the nodes they look at (`nodeSelector`), the pods they may move
//! (`podSelectors`, any of which matches; `evictableNamespaces`), parsed once.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::api::field::FieldError;
use crate::api::selector::Selector;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::lownodeload::args::Namespaces;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodSelector {
    pub name: Option<String>,
    pub selector: Option<LabelSelector>,
}

/// The parsed scope of one plugin.
#[derive(Debug, Clone, Default)]
pub struct KoordScope {
    nodes: Option<Selector>,
    /// `None` entries (a selector left out) match every pod.
    pods: Vec<Option<Selector>>,
    namespaces: Namespaces,
}

fn parse(ls: &LabelSelector, what: String) -> Result<Selector, FieldError> {
    Selector::from_label_selector(ls).map_err(|e| FieldError::new(what, e.to_string()))
}

impl KoordScope {
    pub fn new(
        nodes: Option<&LabelSelector>,
        pods: &[PodSelector],
        namespaces: Option<&Namespaces>,
    ) -> Result<KoordScope, FieldError> {
        let ns = namespaces.cloned().unwrap_or_default();
        if !ns.include.is_empty() && !ns.exclude.is_empty() {
            return Err(FieldError::new(
                "evictableNamespaces",
                "only one of Include/Exclude namespaces can be set",
            ));
        }
        let pods = pods
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let what = format!("podSelectors[{}]", p.name.clone().unwrap_or(i.to_string()));
                p.selector.as_ref().map(|s| parse(s, what)).transpose()
            })
            .collect::<Result<_, _>>()?;
        Ok(KoordScope {
            nodes: nodes.map(|s| parse(s, "nodeSelector".into())).transpose()?,
            pods,
            namespaces: ns,
        })
    }

    pub fn node(&self, n: &Node) -> bool {
        self.nodes
            .as_ref()
            .is_none_or(|s| s.matches_opt(n.metadata.labels.as_ref()))
    }

    /// `podSelectors` (none listed: every pod; a selector-less entry: every pod).
    pub fn selected(&self, p: &PodView) -> bool {
        if self.pods.is_empty() {
            return true;
        }
        let labels = p.labels_map();
        self.pods
            .iter()
            .any(|s| s.as_ref().is_none_or(|s| s.matches_opt(labels.as_ref())))
    }

    /// `podSelectors` and `evictableNamespaces`.
    pub fn pod(&self, p: &PodView) -> bool {
        self.namespaces.allows(&p.namespace) && self.selected(p)
    }
}
