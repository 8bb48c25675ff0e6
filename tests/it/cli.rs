//! The `koord` command line as a user sees it.

use crate::common;

use std::process::Command;

fn koord(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::koord_bin())
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", "/nonexistent-home")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn help_lists_roles_and_subcommands() {
    let (code, out, _) = koord(&["--help"]);
    assert_eq!(code, 0);
    for word in [
        "manager",
        "scheduler",
        "descheduler",
        "koordlet",
        "runtime-proxy",
        "all",
        "crds",
        "manifests",
        "config",
        "Koordinator component",
    ] {
        assert!(out.contains(word), "--help should mention {word}:\n{out}");
    }
}

#[test]
fn version_prints_version() {
    let (code, out, _) = koord(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), format!("koord {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn unknown_role_exits_2_listing_valid_roles() {
    let (code, _, err) = koord(&["--role=manager,kubelet"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown role `kubelet`"), "{err}");
    assert!(
        err.contains("manager, scheduler, descheduler, koordlet, runtime-proxy, or all"),
        "{err}"
    );
}

#[test]
fn no_role_is_a_usage_error() {
    let (code, _, err) = koord(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("--role"), "{err}");
}

#[test]
fn role_without_cluster_exits_1_saying_where_it_looked() {
    let (code, _, err) = koord(&["--role=scheduler", "--admin-addr=127.0.0.1:0"]);
    assert_eq!(code, 1, "{err}");
    for place in [
        "--kubeconfig",
        "$KUBECONFIG",
        "/nonexistent-home/.kube/config",
        "in-cluster",
    ] {
        assert!(err.contains(place), "message should name {place}: {err}");
    }
}

#[test]
fn config_print_merges_file_env_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("koord.yaml");
    std::fs::write(&file, "common:\n  logLevel: debug\n  nodeName: from-file\n").unwrap();
    let out = Command::new(common::koord_bin())
        .args(["config", "print", "--role=koordlet", "--config"])
        .arg(&file)
        .args(["--node-name", "from-flag"])
        .env("KOORD_COMMON__LOG_LEVEL", "warn")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(
        v["common"]["logLevel"].as_str(),
        Some("warn"),
        "env beats file"
    );
    assert_eq!(
        v["common"]["nodeName"].as_str(),
        Some("from-flag"),
        "flag beats file"
    );
    assert!(
        v.get("koordlet").is_some() && v.get("manager").is_none(),
        "{text}"
    );
}

#[test]
fn bad_config_exits_2_naming_key_and_source() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, "common:\n  adminAdress: 1.2.3.4:5\n").unwrap();
    let (code, _, err) = koord(&["--config", file.to_str().unwrap(), "config", "print"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("adminAdress") && err.contains("bad.yaml"),
        "{err}"
    );
}

#[test]
fn crds_prints_every_crd() {
    let (code, out, _) = koord(&["crds"]);
    assert_eq!(code, 0);
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&out)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), koord::api::crds::all().len());
    assert!(
        docs.iter()
            .all(|d| d["kind"].as_str() == Some("CustomResourceDefinition"))
    );
}

#[test]
fn an_endless_config_file_is_refused_not_read_forever() {
    let started = std::time::Instant::now();
    let (code, _, err) = koord(&["--config", "/dev/zero", "config", "print"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("/dev/zero") && err.contains("not a configuration file"),
        "{err}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
