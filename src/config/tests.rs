use super::*;

fn host() -> HostEnv {
    HostEnv::for_tests("Test-Host")
}

fn yaml(text: &str) -> Option<YamlSource<'_>> {
    Some(YamlSource::Text {
        name: "test.yaml",
        text,
    })
}

#[test]
fn defaults_follow_host() {
    let cfg = load(&host(), None, vec![]).unwrap();
    assert_eq!(cfg.common.node_name, "test-host");
    assert_eq!(cfg.common.admin_addr.to_string(), "127.0.0.1:9316");
    let with_node = host().with_var("NODE_NAME", "node-7");
    assert_eq!(
        load(&with_node, None, vec![]).unwrap().common.node_name,
        "node-7"
    );
}

#[test]
fn precedence_file_env_flag() {
    let file = "common:\n  logLevel: debug\n  adminAddr: 127.0.0.1:1001\n  nodeName: from-file\n";
    let cfg = load(&host(), yaml(file), vec![]).unwrap();
    assert_eq!(cfg.common.log_level, "debug");
    assert_eq!(cfg.common.node_name, "from-file");

    let env = host().with_var("KOORD_COMMON__ADMIN_ADDR", "127.0.0.1:1002");
    let cfg = load(&env, yaml(file), vec![]).unwrap();
    assert_eq!(cfg.common.admin_addr.port(), 1002, "env beats file");
    assert_eq!(
        cfg.common.log_level, "debug",
        "file value kept where env is silent"
    );

    let flags = vec![sources::flag(
        "--admin-addr",
        "common.adminAddr",
        "127.0.0.1:1003",
    )];
    let cfg = load(&env, yaml(file), flags).unwrap();
    assert_eq!(cfg.common.admin_addr.port(), 1003, "flag beats env");
}

#[test]
fn unknown_key_names_key_and_file() {
    let err = load(&host(), yaml("common:\n  adminAdress: x\n"), vec![])
        .unwrap_err()
        .to_string();
    assert!(err.contains("adminAdress"), "{err}");
    assert!(err.contains("test.yaml"), "{err}");
}

#[test]
fn unknown_section_named() {
    let err = load(&host(), yaml("kubelet: {}\n"), vec![])
        .unwrap_err()
        .to_string();
    assert!(err.contains("kubelet"), "{err}");
}

#[test]
fn wrong_type_from_env_names_variable() {
    let env = host().with_var("KOORD_COMMON__SHUTDOWN_GRACE_SECONDS", "soon");
    let err = load(&env, None, vec![]).unwrap_err().to_string();
    assert!(
        err.contains("KOORD_COMMON__SHUTDOWN_GRACE_SECONDS"),
        "{err}"
    );
    assert!(err.contains("shutdownGraceSeconds"), "{err}");
}

#[test]
fn unknown_env_key_named() {
    let env = host().with_var("KOORD_COMMON__NOPE", "1");
    let err = load(&env, None, vec![]).unwrap_err().to_string();
    assert!(
        err.contains("KOORD_COMMON__NOPE") && err.contains("nope"),
        "{err}"
    );
}

#[test]
fn invalid_values_name_key_and_source() {
    let err = load(&host(), yaml("common:\n  logFormat: xml\n"), vec![])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("logFormat") && err.contains("test.yaml"),
        "{err}"
    );

    let flags = vec![sources::flag("--log-level", "common.logLevel", "[[bad")];
    let err = load(&host(), None, flags).unwrap_err().to_string();
    assert!(
        err.contains("common.logLevel") && err.contains("flag `--log-level`"),
        "{err}"
    );

    let err = load(&host(), yaml("common:\n  nodeName: Bad_Name\n"), vec![])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("common.nodeName") && err.contains("test.yaml"),
        "{err}"
    );
}

#[test]
fn missing_file_is_an_error() {
    let err = load(
        &host(),
        Some(YamlSource::File(Path::new("/nonexistent/koord.yaml"))),
        vec![],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("/nonexistent/koord.yaml"), "{err}");
}

#[test]
fn example_file_has_every_key_with_its_default() {
    let text = include_str!("../../config/koord.yaml");
    let from_file: serde_json::Value = serde_yaml::from_str(text).unwrap();
    let mut defaults = serde_json::to_value(Config::defaults(&host())).unwrap();
    // Host-derived defaults are documented as comments, not values.
    for key in ["nodeName", "dataDir"] {
        defaults["common"].as_object_mut().unwrap().remove(key);
        assert!(
            text.contains(&format!("# {key}:")),
            "{key} must be documented"
        );
    }
    assert_eq!(
        from_file, defaults,
        "config/koord.yaml must list every key with its default"
    );
    load(
        &host(),
        Some(YamlSource::Text {
            name: "koord.yaml",
            text,
        }),
        vec![],
    )
    .unwrap();
}

#[test]
fn print_limits_sections_and_redacts() {
    let mut cfg = Config::defaults(&host());
    cfg.embedded.bearer_token = Some("tok-3141".into());
    let roles = crate::kernel::role::parse_roles("manager").unwrap();
    let yaml = to_yaml(&cfg, Some(&roles));
    assert!(yaml.contains("common:") && yaml.contains("manager:"));
    assert!(!yaml.contains("koordlet:"));
    assert!(
        !to_yaml(&cfg, None).contains("tok-3141"),
        "printed in clear"
    );
    let mut v = serde_json::json!({"a": {"bearerToken": "s3cret", "tokenFile": "/x", "n": 1}});
    redact(&mut v);
    assert_eq!(v["a"]["bearerToken"], "<redacted>");
    assert_eq!(v["a"]["tokenFile"], "/x");
    // Credentials inside a URL are secrets too (`/debug/config`, `config print`).
    cfg.koordlet.kubelet.pods_url = Some("https://admin:hunter2@10.0.0.1:10250/pods?x=a@b".into());
    let shown = redacted_json(&cfg);
    assert_eq!(
        shown["koordlet"]["kubelet"]["podsUrl"],
        "https://<redacted>@10.0.0.1:10250/pods?x=a@b"
    );
    assert!(!to_yaml(&cfg, None).contains("hunter2"));
    assert_eq!(redact_url("http://plain.host/p@q"), None);
    assert_eq!(
        redact_url("https://h/p?watch=1&access_token=abc&X-Amz-Signature=s#f").as_deref(),
        Some("https://h/p?watch=1&access_token=<redacted>&X-Amz-Signature=<redacted>#f"),
        "a token in the query string is a secret too"
    );
    cfg.koordlet.kubelet.pods_url = Some("https://10.0.0.1:10250/pods?token=qs-2718".into());
    assert!(!redacted_json(&cfg).to_string().contains("qs-2718"));
    assert_eq!(redact_url("no url"), None);
}

#[test]
fn deeply_nested_config_is_refused_before_parsing() {
    let flow = format!("common: {}{}", "[".repeat(100_000), "]".repeat(100_000));
    let err = load(&host(), yaml(&flow), vec![]).unwrap_err().to_string();
    assert!(
        err.contains("test.yaml") && err.contains("nested deeper"),
        "{err}"
    );
    let mut block = String::new();
    for i in 0..2_000 {
        block.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
    }
    let err = load(&host(), yaml(&block), vec![]).unwrap_err().to_string();
    assert!(err.contains("nested deeper"), "{err}");
}
