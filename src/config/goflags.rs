//! The flags of the Koordinator components koord replaces (koordlet, koord-manager,
//! koord-scheduler, koord-descheduler, koord-runtime-proxy), as their manifests pass them,
//! mapped onto koord's configuration. Go's flag syntax is accepted: one or two dashes,
//! `-name=value` or `-name value`. Flags with no koord counterpart are warned about (or,
//! when they only tune Go's runtime or klog, noted once), never a start failure.
//!
//! Translation runs before clap, and only when `--role` is given: subcommands keep clap's
//! strict parsing.

use std::collections::BTreeMap;

use figment::value::Value;

use super::sources::{KeyValue, flag};
use crate::kernel::compat::Unsupported;
use crate::kernel::features::{GateTable, parse_flag};
use crate::kernel::role::{Role, parse_roles};

pub mod table;

use table::{Conv, Spec, To};

/// What translation made of the command line.
#[derive(Debug, Default)]
pub struct Translated {
    /// The arguments clap parses: koord's own flags, in clap's syntax.
    pub argv: Vec<String>,
    /// Configuration layers from Koordinator flags, in command-line order.
    pub layers: Vec<KeyValue>,
    /// Flags accepted without effect, by role (warned, counted, refused when strict).
    pub unsupported: Vec<(Role, Unsupported)>,
    /// Flags accepted with nothing to do (klog, pprof), one line each.
    pub notes: Vec<String>,
    /// Values that could not be read, naming the flag.
    pub errors: Vec<String>,
}

/// Translates `argv` (program name first). `own` lists koord's own long flag names.
pub fn translate(argv: Vec<String>, own: &[String]) -> Translated {
    let roles = roles_of(&argv);
    if roles.is_empty() {
        return Translated {
            argv,
            ..Translated::default()
        };
    }
    let mut t = Translated::default();
    let mut args = argv.into_iter();
    t.argv.extend(args.next());
    let rest: Vec<String> = args.collect();
    let mut i = 0;
    while i < rest.len() {
        let arg = &rest[i];
        i += 1;
        // clap's short flags (help, version) are not Go flags.
        let short = arg.len() == 2 && arg.starts_with('-');
        let Some(body) = flag_body(arg).filter(|_| !short) else {
            t.argv.push(arg.clone());
            continue;
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let specs = table::find(&roles, name);
        if own.iter().any(|o| o == name) && specs.is_empty() {
            let config_kind = (name == "config")
                .then(|| inline.clone().or_else(|| rest.get(i).cloned()))
                .flatten()
                .and_then(|path| component_config(&path).map(|key| (key, path)));
            if let Some((key, path)) = config_kind {
                if inline.is_none() {
                    i += 1;
                }
                t.layers.push(flag(&format!("--{name}"), key, path));
                continue;
            }
            t.argv.push(match &inline {
                Some(v) => format!("--{name}={v}"),
                None => format!("--{name}"),
            });
            continue;
        }
        // Bool flags take no separate value; a flag koord only notes or warns about (or
        // does not know) takes the next argument unless that is another flag.
        let next_is_flag = rest.get(i).is_none_or(|n| n.starts_with('-'));
        let is_bool = specs.first().is_some_and(|s| s.conv() == Some(Conv::Bool))
            || (specs.iter().all(|s| s.conv().is_none()) && next_is_flag);
        let value = match inline {
            Some(v) => v,
            None if is_bool => "true".into(),
            None => match rest.get(i) {
                Some(v) => {
                    i += 1;
                    v.clone()
                }
                None => {
                    t.errors.push(format!("flag -{name} needs a value"));
                    continue;
                }
            },
        };
        if specs.is_empty() {
            for role in &roles {
                t.unsupported.push((
                    *role,
                    Unsupported::new(
                        "flag",
                        name,
                        format!("flag -{name}={value} is not known to koord's {role}; ignored"),
                    ),
                ));
            }
            continue;
        }
        apply(&mut t, &roles, name, &value, &specs);
    }
    t
}

/// `-name...` / `--name...` without its dashes; `None` for a positional or `-`/`--`.
fn flag_body(arg: &str) -> Option<&str> {
    let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    (!body.is_empty() && !body.starts_with('-')).then_some(body)
}

/// The roles `--role` names anywhere on the line (any dash and value syntax).
fn roles_of(argv: &[String]) -> Vec<Role> {
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        let Some(body) = flag_body(a) else { continue };
        let value = match body.split_once('=') {
            Some(("role", v)) => v.to_string(),
            None if body == "role" => it.next().cloned().unwrap_or_default(),
            _ => continue,
        };
        return parse_roles(&value).map(|r| r.0).unwrap_or_default();
    }
    Vec::new()
}

/// The configuration key a `--config` file belongs to, from its `kind`: Koordinator's
/// scheduler and descheduler take their component configuration with `--config`.
fn component_config(path: &str) -> Option<&'static str> {
    let text = crate::os::files::read_config(std::path::Path::new(path)).ok()?;
    crate::api::input::prescan_yaml(text.as_bytes()).ok()?;
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).ok()?;
    match doc.get("kind")?.as_str()? {
        "KubeSchedulerConfiguration" => Some("scheduler.configFile"),
        "DeschedulerConfiguration" => Some("descheduler.configFile"),
        _ => None,
    }
}

fn apply(t: &mut Translated, roles: &[Role], name: &str, value: &str, specs: &[&Spec]) {
    let source = format!("-{name}");
    for spec in specs {
        match &spec.to {
            To::Key(key, conv) => match convert(*conv, value) {
                Ok(Some(v)) => {
                    let v = match conv {
                        Conv::Gates => gates_for(spec.role, roles, v),
                        _ => v,
                    };
                    t.layers.push(flag(&source, key, v));
                }
                Ok(None) => {}
                Err(e) => t.errors.push(format!("flag {source}={value}: {e}")),
            },
            To::Note(why) => {
                let note = format!("flag {source} accepted: {why}");
                if !t.notes.contains(&note) {
                    t.notes.push(note);
                }
            }
            To::Only(ok, _) if value.eq_ignore_ascii_case(ok) => {}
            To::Only(_, why) | To::Unsupported(why) => t.unsupported.push((
                spec.role,
                Unsupported::new(
                    "flag",
                    name,
                    format!("flag {source}={value} is ignored: {why}"),
                ),
            )),
        }
    }
}

/// Reads a flag value as its configuration value; `None` keeps koord's default.
fn convert(conv: Conv, v: &str) -> Result<Option<Value>, String> {
    let dur = || crate::api::duration::parse(v).map_err(|e| e.to_string());
    Ok(Some(match conv {
        Conv::Str => Value::from(v.to_string()),
        Conv::Bool => Value::from(
            v.parse::<bool>()
                .map_err(|_| format!("{v:?} is not true or false"))?,
        ),
        Conv::U64 => Value::from(
            v.parse::<u64>()
                .map_err(|_| format!("{v:?} is not a whole number"))?,
        ),
        Conv::F64 => Value::from(
            v.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .ok_or_else(|| format!("{v:?} is not a number"))?,
        ),
        Conv::Millis => Value::from(dur()?.as_millis() as u64),
        Conv::Secs | Conv::SecsOrDefault => {
            let s = dur()?.as_secs();
            if s == 0 && conv == Conv::SecsOrDefault {
                return Ok(None);
            }
            Value::from(s)
        }
        Conv::Mins => Value::from(dur()?.as_secs() / 60),
        Conv::Hours => Value::from(dur()?.as_secs() / 3600),
        Conv::Addr => Value::from(go_addr(v)?),
        Conv::Port => match v.parse::<u16>() {
            Ok(0) => return Ok(None),
            Ok(port) => Value::from(format!("0.0.0.0:{port}")),
            Err(_) => Value::from(go_addr(v)?),
        },
        Conv::Dir => {
            let path = std::path::Path::new(v);
            let dir = match path.extension().is_some_and(|e| e == "json") {
                true => path.parent().ok_or("a directory is needed")?,
                false => path,
            };
            Value::from(dir.display().to_string())
        }
        Conv::Gates => {
            let map = parse_flag(v)?;
            if map.is_empty() {
                return Ok(None);
            }
            Value::from(map)
        }
    }))
}

fn go_addr(v: &str) -> Result<String, String> {
    crate::kernel::listen::go_addr(v).map(|a| a.to_string())
}

/// With several roles in one process, each role's gate map keeps the gates its own table
/// knows (and `AllAlpha`/`AllBeta`); a gate no running role knows goes to every role, to
/// be warned about there.
fn gates_for(role: Role, roles: &[Role], v: Value) -> Value {
    let Value::Dict(_, map) = &v else { return v };
    let known = |r: Role, n: &str| table_of(r).is_some_and(|t| t.gates.iter().any(|g| g.name == n));
    let keep: BTreeMap<String, Value> = map
        .iter()
        .filter(|(n, _)| {
            n.as_str() == "AllAlpha"
                || n.as_str() == "AllBeta"
                || known(role, n)
                || !roles.iter().any(|r| known(*r, n))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::from(keep)
}

fn table_of(role: Role) -> Option<&'static GateTable> {
    match role {
        Role::Koordlet => Some(&crate::koordlet::features::KOORDLET_GATES),
        Role::Manager => Some(&crate::manager::features::MANAGER_GATES),
        Role::Scheduler => Some(&crate::scheduler::features::SCHEDULER_GATES),
        _ => None,
    }
}

#[cfg(test)]
#[path = "goflags_tests.rs"]
mod tests;
