//! Feature gates, one implementation for every role: each role lists Koordinator's gates
//! with their upstream defaults and says which ones koord implements. A config naming an
//! unknown gate is an error; switching on a gate koord does not implement is an error or a
//! loud warning, as the role's table says — never a silent no-op.

use std::collections::BTreeMap;

/// One gate: its name, Koordinator's default, and whether koord acts on it.
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    pub name: &'static str,
    pub default: bool,
    pub implemented: bool,
}

/// Shorthand for gate tables.
pub const fn gate(name: &'static str, default: bool, implemented: bool) -> Gate {
    Gate {
        name,
        default,
        implemented,
    }
}

/// What switching on an unimplemented gate does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unimplemented {
    /// Refuse the configuration (a webhook that silently allows what Koordinator denies
    /// would be worse than not starting).
    Refuse,
    /// Start, warning once per gate (Koordinator's own koordlet ignores gates it cannot
    /// act on, so configs written for it keep working).
    Warn,
}

/// A role's gates.
#[derive(Debug)]
pub struct GateTable {
    /// The role, for messages (`koordlet`, `manager`).
    pub role: &'static str,
    pub gates: &'static [Gate],
    pub unimplemented: Unimplemented,
}

/// Effective gate values: the table's defaults overridden by the user's map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gates(BTreeMap<&'static str, bool>);

impl GateTable {
    fn find(&self, name: &str) -> Option<&Gate> {
        self.gates.iter().find(|g| g.name == name)
    }

    /// Koordinator's defaults.
    pub fn defaults(&self) -> Gates {
        Gates(self.gates.iter().map(|g| (g.name, g.default)).collect())
    }

    /// Problems with the user's map, as messages: unknown names, and (for `Refuse`)
    /// unimplemented gates switched on.
    pub fn problems(&self, user: &BTreeMap<String, bool>) -> Vec<String> {
        let mut out = Vec::new();
        for (name, on) in user {
            match self.find(name) {
                None => out.push(format!("unknown {} feature gate {name:?}", self.role)),
                Some(g) if *on && !g.implemented && self.unimplemented == Unimplemented::Refuse => {
                    out.push(format!(
                        "feature gate {name} is not implemented by koord yet; leave it off"
                    ));
                }
                Some(_) => {}
            }
        }
        out
    }

    /// Gates switched on that koord does not implement (warned about under `Warn`).
    pub fn switched_on_unimplemented(&self, user: &BTreeMap<String, bool>) -> Vec<&'static str> {
        user.iter()
            .filter(|(_, on)| **on)
            .filter_map(|(n, _)| self.find(n))
            .filter(|g| !g.implemented)
            .map(|g| g.name)
            .collect()
    }

    /// The effective gates, or every problem joined.
    pub fn from_user(&self, user: &BTreeMap<String, bool>) -> Result<Gates, String> {
        let problems = self.problems(user);
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        let mut gates = self.defaults();
        for (name, on) in user {
            if let Some(g) = self.find(name) {
                gates.0.insert(g.name, *on);
            }
        }
        Ok(gates)
    }
}

impl Gates {
    pub fn enabled(&self, name: &str) -> bool {
        self.0.get(name).copied().unwrap_or(false)
    }

    /// A copy with one gate set (tests, benches).
    pub fn with(mut self, name: &'static str, on: bool) -> Gates {
        self.0.insert(name, on);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: GateTable = GateTable {
        role: "test",
        gates: &[
            gate("On", true, true),
            gate("Off", false, true),
            gate("Later", false, false),
        ],
        unimplemented: Unimplemented::Refuse,
    };

    fn user(pairs: &[(&str, bool)]) -> BTreeMap<String, bool> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn defaults_overrides_and_problems() {
        let d = TABLE.defaults();
        assert!(d.enabled("On") && !d.enabled("Off") && !d.enabled("Nope"));
        let g = TABLE
            .from_user(&user(&[("Off", true), ("On", false)]))
            .unwrap();
        assert!(g.enabled("Off") && !g.enabled("On"));
        assert!(
            TABLE
                .from_user(&user(&[("Nope", true)]))
                .unwrap_err()
                .contains("unknown test feature gate")
        );
        assert!(
            TABLE
                .from_user(&user(&[("Later", true)]))
                .unwrap_err()
                .contains("not implemented")
        );
        assert!(TABLE.from_user(&user(&[("Later", false)])).is_ok());
        let warn = GateTable {
            unimplemented: Unimplemented::Warn,
            ..TABLE
        };
        let u = user(&[("Later", true)]);
        assert!(warn.from_user(&u).unwrap().enabled("Later"));
        assert_eq!(warn.switched_on_unimplemented(&u), ["Later"]);
    }
}
