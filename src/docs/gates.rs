//! The feature-gates reference: each role's gates with Koordinator's default and whether
//! koord acts on them.

use super::header;
use crate::kernel::features::GateTable;

pub fn page() -> String {
    let mut out = header("Feature gates", "the roles' gate tables");
    out.push_str(
        "Set them as Koordinator does (`--feature-gates=A=true,B=false`) or under the role's \
         `featureGates` key. A gate koord does not act on yet is accepted; switching it on is \
         warned about (refused with `common.strict: true`).\n",
    );
    for (flag_key, table) in [
        (
            "koordlet.featureGates",
            &crate::koordlet::features::KOORDLET_GATES,
        ),
        (
            "manager.featureGates",
            &crate::manager::features::MANAGER_GATES,
        ),
        (
            "scheduler.featureGates",
            &crate::scheduler::features::SCHEDULER_GATES,
        ),
    ] {
        out.push_str(&section(flag_key, table));
    }
    out
}

fn section(key: &str, table: &GateTable) -> String {
    let mut out = format!(
        "\n## {}\n\nKey `{key}`.\n\n| gate | default | koord acts on it |\n|---|---|---|\n",
        table.role
    );
    let mut gates: Vec<_> = table.gates.iter().collect();
    gates.sort_by_key(|g| g.name);
    for g in gates {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            g.name,
            g.default,
            if g.implemented { "yes" } else { "not yet" }
        ));
    }
    out
}
