//! koord-manager's `--controllers`: which controllers run. Koordinator's syntax: a comma list
//! of `*` (every controller), `name` and `-name`; a name given explicitly wins, then its
//! `-name`, then `*`.

/// Koordinator's controllers, as `--controllers` names them.
pub const NAMES: &[&str] = &[
    "colocationprofile",
    "nodemetric",
    "noderesource",
    "nodeslo",
    "quotaprofile",
];

/// Controllers koord does not run yet: named explicitly, they are warned about.
pub const NOT_YET: &[&str] = &[];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    /// Runs only with the `ColocationProfileController` gate, as Koordinator's.
    pub colocationprofile: bool,
    pub nodemetric: bool,
    pub noderesource: bool,
    pub nodeslo: bool,
    pub quotaprofile: bool,
}

/// Whether `name` runs under `spec` (Koordinator's `isControllerEnabled`).
pub fn enabled(spec: &str, name: &str) -> bool {
    let items: Vec<&str> = spec.split(',').map(str::trim).collect();
    if items.contains(&name) {
        return true;
    }
    if items.iter().any(|i| i.strip_prefix('-') == Some(name)) {
        return false;
    }
    items.contains(&"*")
}

/// The selection, or the first name that is no controller of Koordinator's.
pub fn parse(spec: &str) -> Result<Selection, String> {
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let name = item.strip_prefix('-').unwrap_or(item);
        if name != "*" && !NAMES.contains(&name) {
            return Err(format!(
                "unknown controller {name:?}; Koordinator's are {}",
                NAMES.join(", ")
            ));
        }
    }
    Ok(Selection {
        colocationprofile: enabled(spec, "colocationprofile"),
        nodemetric: enabled(spec, "nodemetric"),
        noderesource: enabled(spec, "noderesource"),
        nodeslo: enabled(spec, "nodeslo"),
        quotaprofile: enabled(spec, "quotaprofile"),
    })
}

/// The controllers named explicitly that koord does not run yet.
pub fn unsupported(spec: &str) -> Vec<&'static str> {
    let items: Vec<&str> = spec.split(',').map(str::trim).collect();
    NOT_YET
        .iter()
        .copied()
        .filter(|n| items.contains(n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn koordinators_precedence() {
        assert!(enabled("*", "nodeslo"));
        assert!(!enabled("*,-nodeslo", "nodeslo"));
        assert!(
            enabled("nodeslo,-nodeslo", "nodeslo"),
            "the explicit name wins"
        );
        assert!(!enabled("nodemetric", "nodeslo"));
        assert!(!enabled("", "nodeslo"));
        let s = parse("*,-noderesource").unwrap();
        assert!(s.nodemetric && s.nodeslo && s.quotaprofile && !s.noderesource);
        assert!(parse("nodeslo,bogus").unwrap_err().contains("\"bogus\""));
        assert!(
            unsupported("*,colocationprofile").is_empty(),
            "every controller runs"
        );
        assert!(unsupported("*").is_empty());
    }
}
