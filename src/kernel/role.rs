//! The roles one koord process can run.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Manager,
    Scheduler,
    Descheduler,
    Koordlet,
    RuntimeProxy,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Manager,
        Role::Scheduler,
        Role::Descheduler,
        Role::Koordlet,
        Role::RuntimeProxy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Manager => "manager",
            Role::Scheduler => "scheduler",
            Role::Descheduler => "descheduler",
            Role::Koordlet => "koordlet",
            Role::RuntimeProxy => "runtime-proxy",
        }
    }

    /// The role's section in the configuration file.
    pub fn config_key(self) -> &'static str {
        match self {
            Role::RuntimeProxy => "runtimeProxy",
            other => other.name(),
        }
    }

    /// The roles that keep state under `common.dataDir` (metrics, checkpoints).
    pub fn uses_data_dir(self) -> bool {
        matches!(self, Role::Koordlet | Role::RuntimeProxy)
    }

    /// Every role but the runtime proxy talks to the API server.
    pub fn needs_cluster(self) -> bool {
        !matches!(self, Role::RuntimeProxy)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The list for error messages and help: `manager, scheduler, ..., or all`.
pub fn valid_roles() -> String {
    let names: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
    format!("{}, or all", names.join(", "))
}

/// A parsed `--role` list: sorted, without duplicates, `all` expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleSet(pub Vec<Role>);

impl RoleSet {
    pub fn contains(&self, role: Role) -> bool {
        self.0.contains(&role)
    }

    /// Only per-node roles (koordlet, runtime proxy): the process shares the node with
    /// the pods it protects, so it runs on a small fixed runtime instead of one thread
    /// per core.
    pub fn node_agent_only(&self) -> bool {
        !self.0.is_empty()
            && self
                .0
                .iter()
                .all(|r| matches!(r, Role::Koordlet | Role::RuntimeProxy))
    }

    pub fn names(&self) -> String {
        let names: Vec<&str> = self.0.iter().map(|r| r.name()).collect();
        names.join(",")
    }
}

/// Parses `manager,scheduler` or `all`.
pub fn parse_roles(s: &str) -> Result<RoleSet, String> {
    let mut roles = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part == "all" {
            roles.extend(Role::ALL);
            continue;
        }
        match Role::ALL.iter().find(|r| r.name() == part) {
            Some(r) => roles.push(*r),
            None if part.is_empty() => {
                return Err(format!("empty role; valid roles: {}", valid_roles()));
            }
            None => {
                return Err(format!(
                    "unknown role `{part}`; valid roles: {}",
                    valid_roles()
                ));
            }
        }
    }
    roles.sort();
    roles.dedup();
    Ok(RoleSet(roles))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists() {
        assert_eq!(
            parse_roles("manager,scheduler").unwrap().0,
            vec![Role::Manager, Role::Scheduler]
        );
        assert_eq!(
            parse_roles("scheduler, manager,scheduler").unwrap().0,
            vec![Role::Manager, Role::Scheduler]
        );
        assert_eq!(parse_roles("all").unwrap().0, Role::ALL.to_vec());
        assert_eq!(
            parse_roles("runtime-proxy").unwrap().0,
            vec![Role::RuntimeProxy]
        );
    }

    #[test]
    fn rejects_unknown_with_valid_list() {
        let err = parse_roles("manager,kubelet").unwrap_err();
        assert!(err.contains("unknown role `kubelet`"), "{err}");
        assert!(err.contains("runtime-proxy, or all"), "{err}");
        assert!(parse_roles("").is_err());
        assert!(parse_roles("manager,").is_err());
    }
}
