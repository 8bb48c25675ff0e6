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
