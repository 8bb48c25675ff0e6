//! What the process learns from its host at start: environment variables, host name,
//! whether it runs as root. Captured once in `main`; everything else receives it.

use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct HostEnv {
    pub vars: BTreeMap<String, String>,
    pub hostname: String,
    pub is_root: bool,
    pub home: Option<PathBuf>,
}

impl HostEnv {
    /// Reads the real environment. The only place koord reads environment variables.
    pub fn capture() -> Self {
        let vars: BTreeMap<String, String> = std::env::vars().collect();
        let hostname = ["/proc/sys/kernel/hostname", "/etc/hostname"]
            .iter()
            .find_map(|p| crate::os::knob::read_opt(std::path::Path::new(p)))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "localhost".into());
        let is_root = crate::os::knob::owner(std::path::Path::new("/proc/self")) == Some(0);
        let home = vars.get("HOME").map(PathBuf::from);
        Self {
            vars,
            hostname,
            is_root,
            home,
        }
    }

    /// A host for tests: no variables, not root.
    pub fn for_tests(hostname: &str) -> Self {
        Self {
            hostname: hostname.into(),
            home: Some(PathBuf::from("/nonexistent")),
            ..Default::default()
        }
    }

    pub fn with_var(mut self, key: &str, value: &str) -> Self {
        self.vars.insert(key.into(), value.into());
        self
    }

    pub fn var(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    /// `NODE_NAME`, else the host name, lowercased as node names must be.
    pub fn default_node_name(&self) -> String {
        self.var("NODE_NAME")
            .filter(|s| !s.is_empty())
            .unwrap_or(&self.hostname)
            .to_ascii_lowercase()
    }

    /// `/var/lib/koord` as root, else `$XDG_DATA_HOME/koord` or `~/.local/share/koord`.
    pub fn default_data_dir(&self) -> PathBuf {
        if self.is_root {
            return PathBuf::from("/var/lib/koord");
        }
        if let Some(xdg) = self.var("XDG_DATA_HOME").filter(|s| !s.is_empty()) {
            return PathBuf::from(xdg).join("koord");
        }
        match &self.home {
            Some(h) => h.join(".local/share/koord"),
            None => PathBuf::from("/tmp/koord"),
        }
    }
}
