//! Container states and the pod status they add up to (phase, conditions,
//! containerStatuses), as the kubelet reports them.

use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Waiting {
        reason: String,
        message: String,
    },
    Running {
        started_at: String,
    },
    Terminated {
        exit_code: i32,
        reason: String,
        message: String,
        started_at: String,
        finished_at: String,
        container_id: String,
    },
}

impl State {
    pub fn waiting(reason: &str, message: impl Into<String>) -> State {
        State::Waiting {
            reason: reason.into(),
            message: message.into(),
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            State::Waiting { reason, message } if message.is_empty() => {
                json!({"waiting": {"reason": reason}})
            }
            State::Waiting { reason, message } => {
                json!({"waiting": {"reason": reason, "message": message}})
            }
            State::Running { started_at } => json!({"running": {"startedAt": started_at}}),
            State::Terminated {
                exit_code,
                reason,
                message,
                started_at,
                finished_at,
                container_id,
            } => {
                let mut t = json!({"exitCode": exit_code, "reason": reason, "startedAt": started_at,
                    "finishedAt": finished_at, "containerID": container_id});
                if !message.is_empty() {
                    t["message"] = message.clone().into();
                }
                json!({"terminated": t})
            }
        }
    }

    pub fn is_running(&self) -> bool {
        matches!(self, State::Running { .. })
    }

    pub fn exit_code(&self) -> Option<i32> {
        match self {
            State::Terminated { exit_code, .. } => Some(*exit_code),
            _ => None,
        }
    }
}

/// What the status reports for one container.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerView {
    pub name: String,
    pub image: String,
    /// `koord-process://<id>` once the container was created.
    pub container_id: Option<String>,
    pub restart_count: u32,
    pub state: State,
    pub last_state: Option<State>,
    /// Will the runtime start it (again)?
    pub will_restart: bool,
}

impl ContainerView {
    fn to_json(&self) -> Value {
        let running = self.state.is_running();
        let mut v = json!({
            "name": self.name, "image": self.image, "imageID": "",
            "ready": running, "started": running, "restartCount": self.restart_count,
            "state": self.state.to_json(),
            "lastState": self.last_state.as_ref().map(State::to_json).unwrap_or_else(|| json!({})),
        });
        if let Some(id) = &self.container_id {
            v["containerID"] = id.clone().into();
        }
        v
    }
}

/// The pod phase from its containers.
pub fn phase(init: &[ContainerView], main: &[ContainerView], init_failed: bool) -> &'static str {
    if init_failed {
        return "Failed";
    }
    let init_done = init.iter().all(|c| c.state.exit_code() == Some(0));
    if !init_done {
        return "Pending";
    }
    if main.iter().any(|c| c.state.is_running() || c.will_restart) {
        let started = main
            .iter()
            .any(|c| c.state.is_running() || c.restart_count > 0 || c.state.exit_code().is_some());
        return if started { "Running" } else { "Pending" };
    }
    if main.iter().all(|c| c.state.exit_code() == Some(0)) {
        "Succeeded"
    } else if main.iter().all(|c| c.state.exit_code().is_some()) {
        "Failed"
    } else {
        "Pending"
    }
}

/// What the status is computed from.
pub struct PodFacts<'a> {
    pub init: &'a [ContainerView],
    pub main: &'a [ContainerView],
    pub init_failed: bool,
    pub sandbox_ready: bool,
    pub start_time: &'a str,
    pub ip: &'a str,
    pub qos_class: &'a str,
    pub now: &'a str,
}

/// The full `status` object.
pub fn pod_status(f: &PodFacts<'_>) -> Value {
    let PodFacts {
        init,
        main,
        init_failed,
        sandbox_ready,
        start_time,
        ip,
        qos_class,
        now,
    } = *f;
    let phase = phase(init, main, init_failed);
    let init_done = init.iter().all(|c| c.state.exit_code() == Some(0));
    let all_ready = !main.is_empty() && main.iter().all(|c| c.state.is_running());
    let cond = |t: &str, ok: bool, reason: &str| {
        let mut c = json!({"type": t, "status": if ok { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": now});
        if !ok && !reason.is_empty() {
            c["reason"] = reason.into();
        }
        c
    };
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let ready_reason = if terminal {
        "PodCompleted"
    } else {
        "ContainersNotReady"
    };
    json!({
        "phase": phase,
        "conditions": [
            cond("PodReadyToStartContainers", sandbox_ready && !terminal, ""),
            cond("Initialized", init_done, "ContainersNotInitialized"),
            cond("Ready", all_ready, ready_reason),
            cond("ContainersReady", all_ready, ready_reason),
            cond("PodScheduled", true, ""),
        ],
        "hostIP": ip, "hostIPs": [{"ip": ip}], "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": start_time,
        "qosClass": qos_class,
        "initContainerStatuses": init.iter().map(ContainerView::to_json).collect::<Vec<_>>(),
        "containerStatuses": main.iter().map(ContainerView::to_json).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(state: State, will_restart: bool) -> ContainerView {
        ContainerView {
            name: "c".into(),
            image: "i".into(),
            container_id: None,
            restart_count: 0,
            state,
            last_state: None,
            will_restart,
        }
    }

    fn done(code: i32) -> State {
        State::Terminated {
            exit_code: code,
            reason: if code == 0 {
                "Completed".into()
            } else {
                "Error".into()
            },
            message: String::new(),
            started_at: "t".into(),
            finished_at: "t".into(),
            container_id: "x".into(),
        }
    }

    #[test]
    fn phases() {
        let running = State::Running {
            started_at: "t".into(),
        };
        let waiting = State::waiting("ContainerCreating", "");
        assert_eq!(phase(&[], &[view(waiting.clone(), true)], false), "Pending");
        assert_eq!(
            phase(&[], &[view(running.clone(), false)], false),
            "Running"
        );
        assert_eq!(phase(&[], &[view(done(0), false)], false), "Succeeded");
        assert_eq!(
            phase(&[], &[view(done(0), false), view(done(1), false)], false),
            "Failed"
        );
        assert_eq!(
            phase(&[], &[view(done(1), true)], false),
            "Running",
            "crash-looping pods are Running"
        );
        assert_eq!(
            phase(
                &[view(running.clone(), false)],
                &[view(waiting.clone(), true)],
                false
            ),
            "Pending",
            "init still running"
        );
        assert_eq!(
            phase(&[view(done(0), false)], &[view(running, false)], false),
            "Running"
        );
        assert_eq!(
            phase(&[view(done(1), false)], &[view(waiting, true)], true),
            "Failed"
        );
    }

    #[test]
    fn status_document() {
        let main = [view(
            State::Running {
                started_at: "t0".into(),
            },
            false,
        )];
        let s = pod_status(&PodFacts {
            init: &[],
            main: &main,
            init_failed: false,
            sandbox_ready: true,
            start_time: "t0",
            ip: "127.0.0.1",
            qos_class: "Burstable",
            now: "t1",
        });
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["conditions"][2]["type"], "Ready");
        assert_eq!(s["conditions"][2]["status"], "True");
        assert_eq!(
            s["containerStatuses"][0]["state"]["running"]["startedAt"],
            "t0"
        );
        assert_eq!(s["qosClass"], "Burstable");
        let t = done(137).to_json();
        assert_eq!(t["terminated"]["exitCode"], 137);
    }
}
