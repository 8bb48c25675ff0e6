//! Create-or-replace for the objects the koordlet owns (its NodeResourceTopology, its
//! Device): written only when they differ from what the API server holds.

use kube::api::{Api, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Creates `want`, or replaces the stored object when `same` says they differ; `carry`
/// moves what the writer does not own (e.g. a status) from the stored object onto `want`.
/// True when something was written.
pub async fn write_if_changed<K>(
    api: &Api<K>,
    mut want: K,
    same: impl Fn(&K, &K) -> bool,
    carry: impl FnOnce(&K, &mut K),
) -> Result<bool, kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = want.meta().name.clone().unwrap_or_default();
    match api.get_opt(&name).await? {
        None => api
            .create(&PostParams::default(), &want)
            .await
            .map(|_| true),
        Some(have) if same(&have, &want) => Ok(false),
        Some(have) => {
            want.meta_mut().resource_version = have.meta().resource_version.clone();
            carry(&have, &mut want);
            api.replace(&name, &PostParams::default(), &want)
                .await
                .map(|_| true)
        }
    }
}

/// What a report loop last wrote, so an unchanged report costs no API call — except that
/// at least once every `verify_every` rounds it is compared with the stored object anyway,
/// so what others changed or deleted is put back.
pub struct LastWritten<K> {
    last: Option<K>,
    rounds: u64,
    verify_every: u64,
}

impl<K> LastWritten<K> {
    pub fn new(verify_every: u64) -> Self {
        LastWritten {
            last: None,
            rounds: 0,
            verify_every: verify_every.max(1),
        }
    }

    /// Whether this round's `want` must go to the API server (changed, or a check is due).
    pub fn due(&mut self, want: &K, same: impl Fn(&K, &K) -> bool) -> bool {
        self.rounds += 1;
        self.rounds >= self.verify_every || self.last.as_ref().is_none_or(|l| !same(l, want))
    }

    /// `want` is what the API server holds now.
    pub fn written(&mut self, want: K) {
        self.rounds = 0;
        self.last = Some(want);
    }
}

#[cfg(test)]
mod tests {
    use super::LastWritten;

    #[test]
    fn unchanged_reports_are_checked_every_n_rounds() {
        let mut w = LastWritten::new(3);
        let eq = |a: &u32, b: &u32| a == b;
        assert!(w.due(&1, eq), "nothing written yet");
        w.written(1);
        assert!(!w.due(&1, eq));
        assert!(w.due(&2, eq), "changed");
        w.written(2);
        assert!(!w.due(&2, eq));
        assert!(!w.due(&2, eq));
        assert!(w.due(&2, eq), "the third unchanged round checks");
    }
}
