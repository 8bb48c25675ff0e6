//! Koordinator's entry points: its images run `/koord-scheduler`, `/koordlet`, … and the
//! chart's `command` names them. koord run under one of those names (a link to the one
//! binary) is that component: the role is implied, or, for the device daemon, the
//! `device-scan` subcommand. An explicit `--role` (or a subcommand) still wins.

/// Koordinator's component names and the argument each implies.
pub const ENTRY_POINTS: &[(&str, &str)] = &[
    ("koord-scheduler", "--role=scheduler"),
    ("koord-descheduler", "--role=descheduler"),
    ("koord-manager", "--role=manager"),
    ("koordlet", "--role=koordlet"),
    ("koord-runtime-proxy", "--role=runtime-proxy"),
    ("koord-device-daemon", "device-scan"),
];

/// Koordinator's koordlet in its DaemonSet ("dsMode", its default unless
/// `agent_mode=hostMode`) finds the host's directories where the chart mounts them, and
/// keeps its metric store and prediction checkpoints where the chart mounts those
/// (Koordinator's `-tsdb-path` and `-prediction-checkpoint-filepath` defaults), so they
/// outlive a container restart.
pub const KOORDLET_DS_MODE: &[&str] = &[
    "-cgroup-root-dir=/host-cgroup/",
    "-tsdb-path=/metric-data/",
    "-prediction-checkpoint-filepath=/prediction-checkpoints",
    "-sys-root-dir=/host-sys/",
    "-var-run-root-dir=/host-var-run/",
    "-runtime-hooks-addr=/host-var-run-koordlet/koordlet.sock",
    "-runtime-hooks-config-path=/host-etc-hookserver/",
];

/// `argv` with the arguments its program name implies inserted first (the koordlet's
/// DaemonSet paths too, unless `host_mode`), unless the command line already says what to
/// run; flags given on the command line come after, so they win.
pub fn apply(mut argv: Vec<String>, host_mode: bool) -> Vec<String> {
    let Some(program) = argv.first() else {
        return argv;
    };
    let name = std::path::Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some((_, implied)) = ENTRY_POINTS.iter().find(|(n, _)| *n == name) else {
        return argv;
    };
    let says_role = argv[1..].iter().any(|a| {
        let body = a.trim_start_matches('-');
        a.starts_with('-') && (body == "role" || body.starts_with("role="))
    });
    let subcommand = argv.get(1).is_some_and(|a| !a.starts_with('-'));
    if says_role || subcommand {
        return argv;
    }
    let mut implied = vec![implied.to_string()];
    if name == "koordlet" && !host_mode {
        implied.extend(KOORDLET_DS_MODE.iter().map(|f| f.to_string()));
    }
    argv.splice(1..1, implied);
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Vec<String> {
        apply(args.iter().map(|s| s.to_string()).collect(), true)
    }

    #[test]
    fn the_program_name_picks_the_role() {
        assert_eq!(
            run(&["/koord-scheduler", "--port=10251"]),
            ["/koord-scheduler", "--role=scheduler", "--port=10251"]
        );
        assert_eq!(run(&["koordlet", "-addr=:9316"])[1], "--role=koordlet");
        assert_eq!(
            run(&["/usr/local/bin/koord-device-daemon", "--v=4"]),
            ["/usr/local/bin/koord-device-daemon", "device-scan", "--v=4"]
        );
    }

    #[test]
    fn the_koordlet_finds_the_charts_mounts_unless_in_host_mode() {
        let argv = |host| apply(vec!["/koordlet".into(), "-addr=:9316".into()], host);
        let ds = argv(false);
        assert_eq!(ds[1], "--role=koordlet");
        assert_eq!(&ds[2..2 + KOORDLET_DS_MODE.len()], KOORDLET_DS_MODE);
        assert_eq!(
            ds.last().unwrap(),
            "-addr=:9316",
            "the chart's flags come last"
        );
        assert_eq!(argv(true), ["/koordlet", "--role=koordlet", "-addr=:9316"]);
    }

    #[test]
    fn the_image_links_every_entry_point() {
        let dockerfile = include_str!("../../Dockerfile");
        for (name, _) in ENTRY_POINTS {
            assert!(
                dockerfile.contains(&format!(" {name} "))
                    || dockerfile.contains(&format!(" {name};")),
                "Dockerfile does not link /{name}"
            );
        }
    }

    #[test]
    fn an_explicit_role_or_subcommand_wins() {
        let given = ["/koord-manager", "--role=manager,scheduler"];
        assert_eq!(run(&given), given);
        assert_eq!(run(&["/koordlet", "-role", "koordlet"]).len(), 3);
        assert_eq!(
            run(&["/koord-scheduler", "explain", "schedule"])[1],
            "explain"
        );
        assert_eq!(
            run(&["/usr/bin/koord", "--port=1"]),
            ["/usr/bin/koord", "--port=1"]
        );
    }
}
