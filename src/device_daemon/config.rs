//! The daemon's settings as Koordinator's koord-device-daemon takes them: each flag, else
//! its environment variable (`KDD_ONESHOT`, `KDD_SLEEP_INTERVAL`,
//! `KDD_PRINTS_OUTPUT_FILE` or `PRINTS_OUTPUT_FILE`), else the config file
//! (`--config-file`, `KDD_CONFIG_FILE` or `CONFIG_FILE`: YAML or JSON,
//! `{version: v1, flags: {kdd: {oneshot, sleepInterval, printsOutputFile}}}`), else the
//! default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub const DEFAULT_OUTPUT: &str = "/var/run/koordlet/xpu-device-infos/ic-device";
const DEFAULT_INTERVAL: &str = "900s";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    flags: FileFlags,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFlags {
    #[serde(default)]
    kdd: Option<Kdd>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Kdd {
    oneshot: Option<bool>,
    sleep_interval: Option<String>,
    prints_output_file: Option<String>,
}

/// What the daemon runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub oneshot: bool,
    pub sleep_interval: Duration,
    /// Empty: write nothing.
    pub prints_output_file: PathBuf,
}

/// Flags and environment as given (`None`: not set there).
#[derive(Debug, Default, Clone)]
pub struct Given {
    pub oneshot: Option<bool>,
    pub sleep_interval: Option<String>,
    pub prints_output_file: Option<PathBuf>,
    pub config_file: Option<PathBuf>,
}

fn read_file(path: &Path) -> Result<Kdd, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f: File = serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    match f.version.as_deref() {
        None | Some("") | Some("v1") => Ok(f.flags.kdd.unwrap_or_default()),
        Some(v) => Err(format!("{}: unknown version: {v}", path.display())),
    }
}

/// The settings: flags and environment over the file over the defaults.
pub fn settings(g: &Given, env: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
    let file_path = g
        .config_file
        .clone()
        .or_else(|| env("CONFIG_FILE").map(PathBuf::from));
    let file = match file_path {
        Some(p) if !p.as_os_str().is_empty() => read_file(&p)?,
        _ => Kdd::default(),
    };
    let output = g
        .prints_output_file
        .clone()
        .or_else(|| env("PRINTS_OUTPUT_FILE").map(PathBuf::from))
        .or_else(|| file.prints_output_file.map(PathBuf::from))
        .unwrap_or_else(|| DEFAULT_OUTPUT.into());
    let raw = g
        .sleep_interval
        .clone()
        .or(file.sleep_interval)
        .unwrap_or_else(|| DEFAULT_INTERVAL.into());
    let every = match crate::api::duration::parse(&raw) {
        Ok(d) if d > Duration::ZERO => d,
        _ => {
            return Err(format!(
                "sleep interval {raw:?}: want a positive duration such as 900s"
            ));
        }
    };
    Ok(Settings {
        oneshot: g.oneshot.or(file.oneshot).unwrap_or(false),
        sleep_interval: every,
        prints_output_file: output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn defaults_then_file_then_flags() {
        let s = settings(&Given::default(), no_env).unwrap();
        assert_eq!(
            s,
            Settings {
                oneshot: false,
                sleep_interval: Duration::from_secs(900),
                prints_output_file: DEFAULT_OUTPUT.into()
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kdd.yaml");
        std::fs::write(
            &file,
            "version: v1\nflags:\n  kdd:\n    oneshot: true\n    sleepInterval: 60s\n    printsOutputFile: /tmp/x\n",
        )
        .unwrap();
        let from_file = Given {
            config_file: Some(file.clone()),
            ..Given::default()
        };
        let s = settings(&from_file, no_env).unwrap();
        assert_eq!((s.oneshot, s.sleep_interval.as_secs()), (true, 60));
        assert_eq!(s.prints_output_file, PathBuf::from("/tmp/x"));
        let flags_win = Given {
            oneshot: Some(false),
            sleep_interval: Some("5s".into()),
            ..from_file
        };
        let s = settings(&flags_win, no_env).unwrap();
        assert_eq!((s.oneshot, s.sleep_interval.as_secs()), (false, 5));
    }

    #[test]
    fn the_second_environment_names_and_bad_files() {
        let env = |k: &str| (k == "PRINTS_OUTPUT_FILE").then(|| "/tmp/legacy".to_string());
        assert_eq!(
            settings(&Given::default(), env).unwrap().prints_output_file,
            PathBuf::from("/tmp/legacy")
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kdd.json");
        std::fs::write(&file, r#"{"version": "v2"}"#).unwrap();
        let g = Given {
            config_file: Some(file),
            ..Given::default()
        };
        let err = settings(&g, no_env).unwrap_err();
        assert!(err.contains("unknown version: v2"), "{err}");
        let bad = Given {
            sleep_interval: Some("soon".into()),
            ..Given::default()
        };
        assert!(settings(&bad, no_env).unwrap_err().contains("\"soon\""));
    }
}
