//! The flags reference: koord's own flags and subcommands (from clap), then each role's
//! Koordinator flags in Go's syntax (from the translation table) and what each sets.

use clap::CommandFactory;

use super::{cell, header};
use crate::cli::Cli;
use crate::config::goflags::table::{self, Conv, To};
use crate::kernel::role::Role;

pub fn page() -> String {
    let mut out = header(
        "Flags",
        "koord's command line and its Koordinator flag table",
    );
    let cmd = Cli::command();
    out.push_str(
        "## koord's own flags\n\nEvery process takes these; a flag wins over the \
                  configuration file and the environment.\n\n",
    );
    out.push_str(&args_table(&cmd));
    out.push_str("\n## Subcommands\n\n| command | what it does |\n|---|---|\n");
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        out.push_str(&format!(
            "| `koord {}` | {} |\n",
            sub.get_name(),
            cell(&about)
        ));
    }
    for role in Role::ALL {
        out.push_str(&role_section(role));
    }
    out
}

/// One row per long flag of `cmd`.
fn args_table(cmd: &clap::Command) -> String {
    let mut out = String::from("| flag | meaning | default |\n|---|---|---|\n");
    for a in cmd.get_arguments() {
        let Some(long) = a.get_long() else {
            continue;
        };
        let value = a
            .get_value_names()
            .and_then(|v| v.first())
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        let value = if a.get_action().takes_values() {
            value
        } else {
            String::new()
        };
        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().to_string())
            .collect();
        out.push_str(&format!(
            "| `--{long}{value}` | {} | {} |\n",
            cell(&help),
            cell(&defaults.join(", "))
        ));
    }
    out
}

/// A role's Koordinator flags.
fn role_section(role: Role) -> String {
    let mut out = format!(
        "\n## `--role={}`: Koordinator's flags\n\nIn Go's syntax (`-flag=value`, `--flag value`), \
         as the chart writes them.\n\n| flag | what koord does with it |\n|---|---|\n",
        role.name()
    );
    for spec in table::all().filter(|s| s.role == role) {
        let what = match &spec.to {
            To::Key(key, conv) => format!("sets `{key}` ({})", conv_words(*conv)),
            To::Note(why) => format!("accepted, nothing to do: {why}"),
            To::Only(value, why) => {
                format!("only `{value}`; any other value is unsupported: {why}")
            }
            To::Unsupported(why) => {
                format!("not supported yet (warned; refused with `common.strict`): {why}")
            }
        };
        out.push_str(&format!("| `-{}` | {} |\n", spec.name, cell(&what)));
    }
    out
}

fn conv_words(c: Conv) -> &'static str {
    match c {
        Conv::Str => "text",
        Conv::Bool => "true or false",
        Conv::U64 => "an integer",
        Conv::F64 => "a number",
        Conv::Millis => "a Go duration, in milliseconds",
        Conv::Secs => "a Go duration, in seconds",
        Conv::SecsOrDefault => "a Go duration, in seconds; 0 keeps the default",
        Conv::Mins => "a Go duration, in minutes",
        Conv::Hours => "a Go duration, in hours",
        Conv::Addr => "a listen address; `:port` is every interface",
        Conv::Port => "a port on every interface; 0 is unset",
        Conv::Dir => "a directory; a `*.json` path means its directory",
        Conv::Gates => "feature gates `A=true,B=false`",
    }
}
