//! What a registry says about each family it exposes — name, type, help, label names — so
//! the metrics reference (`koord docs`) is written from the registrations themselves and
//! cannot drift from them.

use std::fmt::Debug;
use std::hash::Hash;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// One family as registered.
#[derive(Debug, Clone)]
pub struct FamilyDoc {
    /// As exposed (a counter's `_total` included).
    pub name: String,
    /// `counter`, `gauge`, `histogram`.
    pub kind: String,
    pub help: String,
    pub labels: Labels,
}

/// A family's label names: worked out from its label type only when the reference asks
/// (registration, on every process's start, does no work for it), or named outright.
#[derive(Debug, Clone)]
pub enum Labels {
    Of(fn() -> Vec<String>),
    Named(Vec<String>),
}

impl Labels {
    pub fn names(&self) -> Vec<String> {
        match self {
            Labels::Of(f) => f(),
            Labels::Named(n) => n.clone(),
        }
    }
}

/// Where a metric's label names come from.
pub trait Labelled {
    fn labels(&self) -> Labels {
        Labels::Named(Vec::new())
    }
}

impl<S, M, C> Labelled for Family<S, M, C>
where
    S: EncodeLabelSet + Default + Clone + Hash + Eq + Debug + Send + Sync + 'static,
{
    fn labels(&self) -> Labels {
        Labels::Of(names_of::<S>)
    }
}

/// The names `S`'s default value encodes.
pub fn names_of<S>() -> Vec<String>
where
    S: EncodeLabelSet + Default + Clone + Hash + Eq + Debug + Send + Sync + 'static,
{
    label_names(&S::default())
}

impl<N, A> Labelled for Counter<N, A> {}
impl<N, A> Labelled for Gauge<N, A> {}
impl Labelled for Histogram {}

/// The names a label set encodes, in order (a set built at run time, such as a
/// `Vec<(&str, String)>`, has none until it is filled).
pub fn label_names<S>(set: &S) -> Vec<String>
where
    S: EncodeLabelSet + Clone + Hash + Eq + Debug + Send + Sync + 'static,
{
    let family = Family::<S, Gauge>::default();
    family.get_or_create(set).set(0);
    let mut registry = Registry::default();
    registry.register("x", "", family);
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
        return Vec::new();
    }
    let sample = text.lines().find(|l| l.starts_with("x{")).unwrap_or("");
    let inner = sample
        .split_once('{')
        .and_then(|(_, r)| r.rsplit_once('}'))
        .map_or("", |(i, _)| i);
    inner
        .split("\",")
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
        .filter(|k| !k.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct Two {
        node: String,
        resource: String,
    }

    #[test]
    fn a_label_struct_names_its_fields() {
        assert_eq!(label_names(&Two::default()), ["node", "resource"]);
        let f = Family::<Two, Counter>::default();
        assert_eq!(f.labels().names(), ["node", "resource"]);
        assert!(Counter::<u64>::default().labels().names().is_empty());
        let runtime: Vec<(&'static str, String)> = Vec::new();
        assert!(label_names(&runtime).is_empty());
    }
}
