//! What a worker tells the outside: container views, the pod status it publishes and
//! the checkpoint it keeps for adoption after a restart.

use super::*;

impl Worker {
    pub(super) fn views(&self, init: bool) -> Vec<ContainerView> {
        self.slots
            .iter()
            .filter(|s| s.init == init)
            .map(|s| ContainerView {
                name: s.spec.name.clone(),
                image: s.spec.image.clone().unwrap_or_default(),
                container_id: s
                    .last_id
                    .as_ref()
                    .map(|id| format!("{RUNTIME_SCHEME}://{id}")),
                restart_count: s.restart_count,
                state: s.state.clone(),
                last_state: s.last.clone(),
                will_restart: s.next_start.is_some() || s.run.is_some(),
            })
            .collect()
    }

    pub(super) async fn publish(&mut self) {
        if self.deleting {
            return;
        }
        let qos = kube_qos(&self.pod).name();
        let status = match (
            &self.last_sent,
            self.slots
                .iter()
                .all(|s| s.next_start.is_none() && s.run.is_none() && s.attempts == 0),
        ) {
            // A pod adopted as finished keeps the status it had.
            (Some(prev), true) if !self.sandbox_ready => prev.clone(),
            _ => {
                let (init, main, now) = (self.views(true), self.views(false), now());
                pod_status(&PodFacts {
                    init: &init,
                    main: &main,
                    init_failed: self.init_failed,
                    sandbox_ready: self.sandbox_ready,
                    start_time: &self.start_time,
                    ip: &self.ctx.ip,
                    qos_class: qos,
                    now: &now,
                })
            }
        };
        let comparable = |v: &Value| {
            let mut c = v.clone();
            for cond in c["conditions"].as_array_mut().into_iter().flatten() {
                cond["lastTransitionTime"] = Value::Null;
            }
            c
        };
        if self.last_sent.as_ref().map(comparable) == Some(comparable(&status)) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        match api
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
        {
            Ok(p) => {
                self.ctx.view_put(&self.uid, &p);
                self.last_sent = Some(status);
            }
            Err(e) => tracing::warn!(pod = %self.name, error = %e, "status update failed"),
        }
    }

    pub(super) fn save_checkpoint(&self) {
        let cp = PodCheckpoint {
            uid: self.uid.clone(),
            namespace: self.ns.clone(),
            name: self.name.clone(),
            pod_dir: self.pod_dir.as_str().to_string(),
            init_done: self.init_done(),
            containers: self
                .slots
                .iter()
                .filter_map(|s| {
                    let r = s.run.as_ref()?;
                    Some(ContainerCheckpoint {
                        name: s.spec.name.clone(),
                        init: s.init,
                        id: r.id.clone(),
                        dir: r.dir.as_str().to_string(),
                        pid: r.pid,
                        start_time: r.start_time,
                        restart_count: s.restart_count,
                        started_at: r.started_at.clone(),
                    })
                })
                .collect(),
        };
        if let Err(e) = checkpoint::save(&self.ctx.checkpoints(), &cp) {
            tracing::warn!(pod = %self.name, error = %e, "writing the pod checkpoint failed");
        }
    }

    /// Takes over the processes a previous koord started for this pod.
    pub(super) fn adopt(&mut self, cp: PodCheckpoint) {
        self.sandbox_ready = self.ctx.cgroups.exists(&self.pod_dir);
        if !self.sandbox_ready {
            self.setup_sandbox();
        }
        let mut keep_dirs = Vec::new();
        for c in &cp.containers {
            let Some(i) = self
                .slots
                .iter()
                .position(|s| s.spec.name == c.name && s.init == c.init)
            else {
                continue;
            };
            self.attempt_seq += 1;
            let attempt = self.attempt_seq;
            self.slots[i].attempts = c.restart_count + 1;
            let log = self.log_path(&self.slots[i]);
            let slot = &mut self.slots[i];
            slot.restart_count = c.restart_count;
            slot.last_id = Some(c.id.clone());
            slot.next_start = None;
            let dir = CgroupDir::new(c.dir.clone());
            if alive(&self.ctx.proc_root, c.pid, c.start_time) {
                keep_dirs.push(dir.clone());
                slot.state = State::Running {
                    started_at: c.started_at.clone(),
                };
                slot.run = Some(Run {
                    id: c.id.clone(),
                    dir,
                    pid: c.pid,
                    start_time: c.start_time,
                    started_at: c.started_at.clone(),
                    started: Instant::now(),
                    oom_before: self.ctx.cgroups.oom_kills(&CgroupDir::new(c.dir.clone())),
                    attempt,
                    stamper: Stamper::new(log),
                });
                let (tx, proc_root, pid, st) = (
                    self.exits_tx.clone(),
                    self.ctx.proc_root.clone(),
                    c.pid,
                    c.start_time,
                );
                // Not our child: its shim (when it ran under one) wrote how it ended.
                let recorded = super::super::shim::exit_file(&self.ctx.dir, &c.id);
                self.waiters.spawn(async move {
                    while alive(&proc_root, pid, st) {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    let _ = tx.send(Exit {
                        slot: i,
                        attempt,
                        code: super::super::shim::recorded_exit(&recorded),
                    });
                });
                tracing::info!(pod = %self.name, container = %c.name, pid = c.pid, "re-adopted running container");
            } else {
                slot.state = State::waiting("ContainerCreating", "");
                slot.next_start = Some(Instant::now());
            }
        }
        if cp.init_done {
            for s in self.slots.iter_mut().filter(|s| s.init) {
                s.state = State::Terminated {
                    exit_code: 0,
                    reason: "Completed".into(),
                    message: String::new(),
                    started_at: String::new(),
                    finished_at: String::new(),
                    container_id: String::new(),
                };
                s.next_start = None;
            }
        }
        for child in self.ctx.cgroups.children(&self.pod_dir) {
            let dir = self.pod_dir.join(&child);
            if !keep_dirs.contains(&dir) {
                reap_cgroup(&self.ctx, &dir);
            }
        }
    }
}
