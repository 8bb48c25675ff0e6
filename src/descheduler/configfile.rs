//! Reading a descheduler configuration: parsed (`config`), then every plugin's args built
//! (`framework`), so a bad file fails at start.

use super::config::{DeschedulerConfig, KOORD_DEFAULT, parse_unchecked};
use crate::api::field::FieldError;

/// The configuration in `text` (`source` names it in errors), plugins' args checked.
pub fn parse(text: &str, source: &str) -> Result<DeschedulerConfig, FieldError> {
    let cfg = parse_unchecked(text, source)?;
    super::framework::Plugins::build(&cfg, 0, super::plugins::registry)?;
    Ok(cfg)
}

/// koord's built-in configuration.
pub fn default_config() -> Result<DeschedulerConfig, FieldError> {
    parse(KOORD_DEFAULT, "built-in koord-descheduler-config")
}

/// The configuration in `path`, or the built-in one.
pub fn load(path: Option<&std::path::Path>) -> Result<DeschedulerConfig, FieldError> {
    match path {
        None => default_config(),
        Some(p) => {
            let text = crate::os::files::read_config(p)
                .map_err(|e| FieldError::whole(e.to_string()).within(p.display()))?;
            parse(&text, &p.display().to_string())
        }
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
