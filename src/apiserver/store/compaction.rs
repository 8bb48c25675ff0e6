//! Compaction and recovery: the database rewritten from the acknowledged objects, when
//! its files grew past twice the live data or after the disk failed and has room again.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::*;

impl Store {
    /// Bytes on disk and bytes of the live objects (`None` for a temporary store).
    pub fn sizes(&self) -> Option<(u64, u64)> {
        let path = self.path.as_ref()?;
        Some((
            backend::disk_bytes(path),
            self.live_bytes.load(Ordering::Relaxed),
        ))
    }

    /// Compacts when the files take more than twice the live data plus the slack (and
    /// the disk has room for the copy).
    pub fn compact_if_needed(&self) -> Result<bool, StoreError> {
        let Some((disk, live)) = self.sizes() else {
            return Ok(false);
        };
        if self.health.failure().is_some()
            || disk <= live.saturating_mul(2) + self.opts.compact_slack_bytes
            || !self.room_for_copy(live)
        {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        self.compact()?;
        let after = self.sizes().map_or(0, |s| s.0);
        tracing::info!(
            before = disk,
            after,
            live,
            took_ms = started.elapsed().as_millis() as u64,
            "compacted the API server's store"
        );
        Ok(true)
    }

    /// Whether the disk holds a fresh copy of `live` bytes (sled's files take about twice
    /// the data) with slack to spare: a copy that runs out of space may never finish.
    fn room_for_copy(&self, live: u64) -> bool {
        let Some(path) = &self.path else {
            return false;
        };
        let dir = path.parent().unwrap_or(path);
        crate::os::files::available_bytes(dir)
            .is_none_or(|free| free >= live.saturating_mul(2) + self.opts.compact_slack_bytes)
    }

    /// Rewrites the live objects into a fresh database and swaps it in. Writers wait;
    /// readers (served from memory) do not.
    pub fn compact(&self) -> Result<(), StoreError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let revs = lock(&self.write);
        // Everything committed must be visible (on disk) before the copy is taken.
        self.settle()?;
        let objects = self.objects_for_copy();
        backend::write_fresh(
            path,
            &self.opts,
            &objects,
            &[("rev", revs.rev), ("ceiling", revs.ceiling)],
        )?;
        let mut slot = self.backend.write().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = slot.take() {
            old.db.flush()?;
        }
        backend::swap_in(path)?;
        *slot = Some(Backend::open(path, &self.opts)?);
        if let Err(e) = crate::os::files::restrict_tree(path) {
            tracing::warn!(error = %e, "narrowing the store's file modes");
        }
        Ok(())
    }

    fn objects_for_copy(&self) -> Vec<(Vec<u8>, Arc<Stored>)> {
        self.mem
            .all()
            .into_iter()
            .map(|(k, ns, name, o)| (db_key(&k, &ns, &name), o))
            .collect()
    }

    /// After a failure: when the disk has room again, writes the acknowledged objects into
    /// a fresh database (on a thread of its own, which a failing disk may hang), swaps it
    /// in and takes writes again. True once healthy.
    pub async fn recover(self: &Arc<Self>) -> bool {
        let Some(failure) = self.health.failure() else {
            return true;
        };
        let Some(path) = self.path.clone() else {
            return false;
        };
        let live: u64 = self.mem.all().iter().map(|o| o.3.bytes.len() as u64).sum();
        if !self.room_for_copy(live) || self.recovering.swap(true, Ordering::SeqCst) {
            return false;
        }
        let store = self.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("apiserver-recover".into())
            .spawn(move || {
                let result = store.rebuild(&path);
                store.recovering.store(false, Ordering::SeqCst);
                let _ = tx.send(result);
            });
        if spawned.is_err() {
            self.recovering.store(false, Ordering::SeqCst);
            return false;
        }
        match tokio::time::timeout(std::time::Duration::from_secs(30), rx).await {
            Ok(Ok(Ok(()))) => {
                tracing::info!(was = %failure.message, "the API server's store takes writes again");
                true
            }
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "the API server's store is not back yet");
                false
            }
            // Hung on the disk: that thread is left behind; no other starts meanwhile.
            _ => false,
        }
    }

    /// The rebuild behind [`Store::recover`]: nothing writes meanwhile (the store refuses
    /// writes while failed), so the snapshot of visible objects is the whole truth.
    fn rebuild(&self, path: &Path) -> Result<(), StoreError> {
        let revs = {
            let r = lock(&self.write);
            (r.rev, r.ceiling)
        };
        let objects = self.objects_for_copy();
        // Revisions go on above everything handed out, acknowledged or not.
        let rev = revs.0.max(revs.1);
        backend::write_fresh(
            path,
            &self.opts,
            &objects,
            &[("rev", rev), ("ceiling", rev)],
        )?;
        let mut slot = self.backend.write().unwrap_or_else(|p| p.into_inner());
        // The failed database is never flushed or closed again (it may hang): its handle
        // is let go without dropping.
        if let Some(old) = slot.take() {
            std::mem::forget(old);
        }
        backend::swap_in(path)?;
        *slot = Some(Backend::open(path, &self.opts)?);
        drop(slot);
        if let Err(e) = crate::os::files::restrict_tree(path) {
            tracing::warn!(error = %e, "narrowing the store's file modes");
        }
        let live: u64 = objects.iter().map(|(_, o)| o.bytes.len() as u64).sum();
        self.live_bytes.store(live, Ordering::Relaxed);
        {
            let mut w = lock(&self.write);
            w.rev = rev;
            w.ceiling = rev;
        }
        self.rev.store(rev, Ordering::SeqCst);
        self.mem.promote(rev);
        let old = lock(&self.group).replace(self.new_group());
        if let Some(old) = old {
            old.retire();
        }
        self.health.recover();
        Ok(())
    }

    /// Waits until every write up to `rev` is on disk; the writes waiting at the same
    /// moment share one flush. A flush that takes longer than [`FLUSH_DEADLINE`] fails
    /// the store: sled may never finish it.
    pub async fn durable(&self, rev: u64) -> Result<(), StoreError> {
        if let Some(f) = self.health.failure()
            && rev > self.visible_rev()
        {
            return Err(StoreError::Unavailable(f));
        }
        let Some(g) = self.group() else {
            return Ok(());
        };
        match tokio::time::timeout(FLUSH_DEADLINE, g.wait(rev)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(StoreError::Unavailable(
                self.health
                    .failure()
                    .unwrap_or_else(|| Failure::other("the store is closed")),
            )),
            Err(_) => Err(self.fail(Failure::other(&format!(
                "storage flush did not complete within {}s",
                FLUSH_DEADLINE.as_secs()
            )))),
        }
    }
}
