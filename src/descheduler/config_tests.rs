use std::time::Duration;

use super::*;

#[test]
fn built_in_config_runs_lownodeload_with_migration_controller() {
    let c = default_config().unwrap();
    assert_eq!(c.interval, Duration::from_secs(10));
    let p = &c.profiles[0];
    assert_eq!(p.name, "koord-descheduler");
    assert_eq!(p.balance, ["LowNodeLoad"]);
    assert_eq!(p.evict, ["MigrationController"]);
    assert_eq!(
        p.filter,
        ["MigrationController"],
        "Koordinator's default Filter"
    );
    assert!(p.deschedule.is_empty());
    assert_eq!(c.lease.1.as_deref(), Some("koord-descheduler"));
}

#[test]
fn plugin_sets_merge_onto_defaults_and_bad_input_names_what_is_wrong() {
    let text = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
maxNoOfPodsToEvictPerNode: 3
profiles:
- name: p
  plugins:
    deschedule: {enabled: [{name: RemoveFailedPods}, {name: Missing}]}
    filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
"#;
    let c = parse(text, "f.yaml").unwrap();
    assert_eq!(c.interval, Duration::ZERO, "unset: one pass");
    assert_eq!(c.limits.per_node, Some(3));
    let p = &c.profiles[0];
    assert_eq!(p.deschedule, ["RemoveFailedPods"]);
    assert_eq!(p.filter, ["DefaultEvictor"]);
    assert_eq!(p.evict, ["MigrationController"]);
    assert_eq!(c.unsupported, ["Missing"], "warned, not fatal");

    let unknown = "profiles: [{name: p, plugins: {balance: {enabled: [{name: Nope}]}}}]";
    let c = parse(unknown, "f.yaml").unwrap();
    assert_eq!(c.unsupported, ["Nope"], "warned, not fatal");
    assert!(
        super::super::config::why_unsupported("Nope").contains("\"Nope\" is unknown"),
        "the warning says the name is unknown"
    );
    let wrong_point =
        "profiles: [{name: p, plugins: {balance: {enabled: [{name: RemoveFailedPods}]}}}]";
    assert!(
        parse(wrong_point, "f")
            .unwrap_err()
            .to_string()
            .contains("plugin \"RemoveFailedPods\" does not extend BalancePlugin plugin")
    );
    let bad_args = "profiles: [{name: p, plugins: {balance: {enabled: [{name: LowNodeLoad}]}}, \
                    pluginConfig: [{name: LowNodeLoad, args: {lowThresholds: {cpu: 90}, highThresholds: {cpu: 50}}}]}]";
    let e = parse(bad_args, "f").unwrap_err().to_string();
    assert!(
        e.contains("pluginConfig[LowNodeLoad]") && e.contains("lowThresholds exceed"),
        "{e}"
    );
    let typo = "deschedulingIntervall: 1s";
    assert!(
        parse(typo, "f")
            .unwrap_err()
            .to_string()
            .contains("deschedulingIntervall")
    );
    let spin = parse("deschedulingInterval: 1ns", "f")
        .unwrap_err()
        .to_string();
    assert!(
        spin.contains("deschedulingInterval") && spin.contains("shorter than 1s"),
        "{spin}"
    );
    assert!(parse("deschedulingInterval: 1s", "f").is_ok());
    let mc = "profiles: [{name: p, pluginConfig: [{name: MigrationController, args: {defaultJobMode: Later}}]}]";
    assert!(
        parse(mc, "f")
            .unwrap_err()
            .to_string()
            .contains("defaultJobMode")
    );
}
