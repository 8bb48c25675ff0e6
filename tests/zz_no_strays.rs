//! Runs after every other test binary (cargo runs them in name order): nothing the suite
//! started may survive it, neither a cgroup directory nor a process.

mod common;

#[test]
fn no_test_cgroups_or_processes_survive() {
    let mut strays = Vec::new();
    for root in [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/cpu",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/cpuset",
        "/sys/fs/cgroup/cpuacct",
    ] {
        for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with("koord-test-") {
                strays.push(format!("cgroup {root}/{name}"));
            }
        }
    }
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(common::STRAY_MARKER) {
            strays.push(format!("process {}", entry.file_name().to_string_lossy()));
        }
    }
    assert!(
        strays.is_empty(),
        "left behind by the test suite: {strays:?}"
    );
}
