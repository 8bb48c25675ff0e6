//! Feature gates, one implementation for every role: each role lists Koordinator's gates
//! with their upstream defaults and says which ones koord implements. Koordinator's
//! `--feature-gates` syntax works, `AllAlpha` / `AllBeta` included. A gate koord does not
//! know, or one switched on that koord does not implement yet, is accepted with a warning
//! (configs written for Koordinator keep working) — or refused in strict mode
//! (`common.strict`), for operators who want a config never to do less than it says.

use std::collections::BTreeMap;

use super::compat::Unsupported;

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

impl Gate {
    /// Koordinator's gates are Beta exactly when on by default, Alpha otherwise
    /// (`pkg/features`), which is what `AllAlpha` / `AllBeta` select on.
    fn beta(&self) -> bool {
        self.default
    }
}

/// The pseudo-gates of Kubernetes' feature-gate syntax.
const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";
const KIND: &str = "featureGate";

/// A role's gates.
#[derive(Debug)]
pub struct GateTable {
    /// The role, for messages (`koordlet`, `manager`).
    pub role: &'static str,
    pub gates: &'static [Gate],
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

    /// What koord will not do as the user's map says, one message each: gates it does not
    /// know, gates switched on that it does not implement (those `AllAlpha`/`AllBeta`
    /// would switch on are listed in one message). Warnings normally; errors when strict.
    pub fn unsupported(&self, user: &BTreeMap<String, bool>) -> Vec<Unsupported> {
        let mut out = Vec::new();
        for (name, on) in user {
            if name == ALL_ALPHA || name == ALL_BETA {
                continue;
            }
            match self.find(name) {
                None => out.push(Unsupported::new(
                    KIND,
                    name,
                    format!(
                        "{} feature gate {name:?} is not known to koord; ignored",
                        self.role
                    ),
                )),
                Some(g) if *on && !g.implemented => out.push(Unsupported::new(
                    KIND,
                    name,
                    format!(
                        "{} feature gate {name} is not implemented by koord yet; ignored",
                        self.role
                    ),
                )),
                Some(_) => {}
            }
        }
        let bulk: Vec<&str> = self
            .gates
            .iter()
            .filter(|g| !g.implemented && !user.contains_key(g.name))
            .filter(|g| bulk_value(user, g) == Some(true))
            .map(|g| g.name)
            .collect();
        if !bulk.is_empty() {
            out.push(Unsupported::new(
                KIND,
                "AllAlpha/AllBeta",
                format!(
                    "AllAlpha/AllBeta: {} feature gates koord does not implement yet stay off: {}",
                    self.role,
                    bulk.join(", ")
                ),
            ));
        }
        out
    }

    /// The effective gates: defaults, then `AllAlpha`/`AllBeta`, then gates by name (as
    /// Kubernetes applies them). Unimplemented gates stay off; unknown names are ignored
    /// (see [`GateTable::unsupported`]).
    pub fn from_user(&self, user: &BTreeMap<String, bool>) -> Gates {
        let mut gates = self.defaults();
        for g in self.gates {
            let v = user.get(g.name).copied().or(bulk_value(user, g));
            if let Some(on) = v {
                gates.0.insert(g.name, on && g.implemented);
            }
        }
        gates
    }
}

/// The value `AllAlpha` / `AllBeta` gives this gate, if the user set the matching one.
fn bulk_value(user: &BTreeMap<String, bool>, g: &Gate) -> Option<bool> {
    user.get(if g.beta() { ALL_BETA } else { ALL_ALPHA })
        .copied()
}

/// Parses Koordinator's `--feature-gates` value: `A=true,B=false`.
pub fn parse_flag(text: &str) -> Result<BTreeMap<String, bool>, String> {
    let mut out = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected Name=true|false"))?;
        let on = v
            .trim()
            .parse::<bool>()
            .map_err(|_| format!("{part:?}: {v:?} is not true or false"))?;
        out.insert(k.trim().to_string(), on);
    }
    Ok(out)
}

impl Gates {
    /// Whether `gate` is on: gates are named by their component's constants, so a
    /// misspelt gate does not compile.
    pub fn on(&self, gate: Gate) -> bool {
        self.enabled(gate.name)
    }

    fn enabled(&self, name: &str) -> bool {
        self.0.get(name).copied().unwrap_or(false)
    }

    /// A copy with one gate set (tests, benches).
    pub fn with(mut self, gate: Gate, on: bool) -> Gates {
        self.0.insert(gate.name, on);
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
            gate("BetaLater", true, false),
        ],
    };

    fn user(pairs: &[(&str, bool)]) -> BTreeMap<String, bool> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn defaults_overrides_and_unsupported() {
        let d = TABLE.defaults();
        assert!(d.enabled("On") && !d.enabled("Off") && !d.enabled("Nope"));
        let g = TABLE.from_user(&user(&[("Off", true), ("On", false)]));
        assert!(g.enabled("Off") && !g.enabled("On"));
        assert!(TABLE.unsupported(&user(&[("Off", true)])).is_empty());
        let u = TABLE.unsupported(&user(&[("Nope", true), ("Later", true)]));
        let msgs: Vec<&str> = u.iter().map(|u| u.message.as_str()).collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(msgs.iter().any(|m| m.contains("Later is not implemented")));
        assert!(msgs.iter().any(|m| m.contains("\"Nope\" is not known")));
        assert!(TABLE.unsupported(&user(&[("Later", false)])).is_empty());
        let g = TABLE.from_user(&user(&[("Later", true)]));
        assert!(!g.enabled("Later"), "an unimplemented gate stays off");
    }

    #[test]
    fn all_alpha_and_all_beta_as_kubernetes_applies_them() {
        let g = TABLE.from_user(&user(&[("AllAlpha", true)]));
        assert!(g.enabled("Off") && g.enabled("On") && !g.enabled("Later"));
        let u = TABLE.unsupported(&user(&[("AllAlpha", true)]));
        assert_eq!(u.len(), 1, "{u:?}");
        assert!(u[0].message.contains("stay off: Later"), "{u:?}");
        let g = TABLE.from_user(&user(&[("AllBeta", false), ("AllAlpha", true)]));
        assert!(!g.enabled("On") && g.enabled("Off"));
        // A gate named explicitly wins over the bulk setting.
        let g = TABLE.from_user(&user(&[("AllAlpha", true), ("Off", false)]));
        assert!(!g.enabled("Off"));
        assert!(TABLE.unsupported(&user(&[("AllAlpha", false)])).is_empty());
    }

    #[test]
    fn parses_the_flag_syntax() {
        let m = parse_flag("AllAlpha=false, BECPUEvict=true,").unwrap();
        assert_eq!(m, user(&[("AllAlpha", false), ("BECPUEvict", true)]));
        assert!(parse_flag("X").unwrap_err().contains("Name=true|false"));
        assert!(
            parse_flag("X=yes")
                .unwrap_err()
                .contains("not true or false")
        );
        assert!(parse_flag("").unwrap().is_empty());
    }

    /// `pub const NAME: Gate = gate("…", default, implemented);` → (NAME, implemented).
    fn declared(features_rs: &str) -> Vec<(String, bool)> {
        let flat = features_rs.replace('\n', " ");
        flat.split("pub const ")
            .skip(1)
            .filter_map(|decl| {
                let (name, rest) = decl.split_once(':')?;
                let args = rest.split_once("gate(")?.1.split_once(')')?.0;
                let implemented = args.rsplit(',').next()?.trim() == "true";
                Some((name.trim().to_string(), implemented))
            })
            .collect()
    }

    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// A gate marked unimplemented is forced off, so code that acts on it never runs: every
    /// gate a component's code checks must be marked implemented (ResctrlCollector,
    /// ColdPageCollector and PerCPUMetric once were not).
    #[test]
    fn every_gate_the_code_acts_on_can_be_switched_on() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for component in ["koordlet", "scheduler", "manager"] {
            let dir = src.join(component);
            let table = std::fs::read_to_string(dir.join("features.rs")).unwrap();
            let gates = declared(&table);
            assert!(gates.len() > 5, "{component}: gates parsed {gates:?}");
            let mut files = Vec::new();
            rust_files(&dir, &mut files);
            for f in files.iter().filter(|f| !f.ends_with("features.rs")) {
                let text = std::fs::read_to_string(f).unwrap();
                for (name, implemented) in &gates {
                    let used = text.contains(&format!("features::{name})"))
                        || text.contains(&format!("features::{name},"));
                    assert!(
                        !used || *implemented,
                        "{} acts on {component} gate {name}, which is marked unimplemented",
                        f.display()
                    );
                }
            }
        }
    }
}
