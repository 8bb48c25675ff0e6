//! Koordinator's scheduler configurations as koord runs them. Plugins koord does not
//! implement yet (DynamicResources) are skipped with a warning; points
//! where a Koordinator plugin does work koord's framework does itself are dropped quietly;
//! plugin args koord ignores are named. In strict mode each warning is an error instead.

use std::collections::BTreeMap;

use serde_json::Value;

use super::framework::Point;
use super::plugins::NOT_YET;
use crate::kernel::compat::Unsupported;

/// Koordinator plugins at points whose work koord's framework does itself.
const FRAMEWORK_DOES: &[(&str, Option<Point>)] = &[
    // Koordinator's DefaultPreBind writes what PreBind changed in one patch; koord's binder
    // always does.
    ("DefaultPreBind", None),
    // koord binds reserve pods by writing the Reservation's status itself.
    ("Reservation", Some(Point::Bind)),
];

/// A plugin name koord accepts because its framework does that plugin's work.
pub fn framework_plugin(name: &str) -> bool {
    FRAMEWORK_DOES
        .iter()
        .any(|(n, p)| *n == name && p.is_none())
}

fn framework_does(name: &str, point: Point) -> bool {
    FRAMEWORK_DOES
        .iter()
        .any(|(n, p)| *n == name && p.is_none_or(|p| p == point))
}

/// Takes the plugins koord cannot run out of a profile's points and args; returns one
/// warning per unimplemented plugin (naming the points it was enabled at).
pub fn strip(
    points: &mut BTreeMap<Point, Vec<(String, i64)>>,
    args: &mut BTreeMap<String, Value>,
) -> Vec<Unsupported> {
    let mut off: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    for (point, list) in points.iter_mut() {
        list.retain(|(name, _)| {
            if NOT_YET.contains(&name.as_str()) {
                off.entry(name.clone()).or_default().push(point.key());
                return false;
            }
            !framework_does(name, *point)
        });
    }
    args.retain(|name, _| {
        if NOT_YET.contains(&name.as_str()) {
            off.entry(name.clone()).or_default();
            return false;
        }
        !framework_plugin(name)
    });
    off.into_iter()
        .map(|(name, at)| {
            let at = if at.is_empty() {
                "pluginConfig".to_string()
            } else {
                at.join(", ")
            };
            skipped(&name, &at)
        })
        .collect()
}

/// The warning for an unimplemented plugin enabled at `at`.
pub fn skipped(name: &str, at: &str) -> Unsupported {
    let message = format!(
        "scheduler plugin {name} is not implemented by koord yet; skipped (enabled at {at})"
    );
    Unsupported::new("plugin", name, message)
}

/// Plugin args that ask for something koord does not do (the plugin itself runs).
pub fn unsupported_args(name: &str, raw: Option<&Value>) -> Vec<Unsupported> {
    // `true`, or any object: the arg asks for something koord does not do.
    let on = |key: &str| {
        raw.and_then(|v| v.get(key))
            .is_some_and(|v| !v.is_null() && v != &Value::Bool(false))
    };
    let ignored: &[(&str, &str, &str)] = &[];
    ignored
        .iter()
        .filter(|(plugin, key, _)| *plugin == name && on(key))
        .map(|(plugin, key, why)| {
            Unsupported::new(
                "pluginArg",
                format!("{plugin}.{key}"),
                format!("scheduler plugin {plugin}: args.{key} is ignored: {why}"),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strips_unimplemented_and_framework_points() {
        let mut points = BTreeMap::from([
            (
                Point::PreFilter,
                vec![("DynamicResources".into(), 1), ("Reservation".into(), 1)],
            ),
            (
                Point::Bind,
                vec![("Reservation".into(), 1), ("DefaultBinder".into(), 1)],
            ),
            (
                Point::PreBind,
                vec![("DynamicResources".into(), 1), ("DefaultPreBind".into(), 1)],
            ),
        ]);
        let mut args = BTreeMap::from([
            ("DynamicResources".to_string(), json!({})),
            ("LoadAwareScheduling".to_string(), json!({})),
        ]);
        let u = strip(&mut points, &mut args);
        let names: Vec<&str> = u.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["DynamicResources"]);
        assert!(
            u[0].message.contains("enabled at preFilter, preBind"),
            "{u:?}"
        );
        assert_eq!(points[&Point::PreFilter], [("Reservation".into(), 1)]);
        assert_eq!(points[&Point::Bind], [("DefaultBinder".into(), 1)]);
        assert!(points[&Point::PreBind].is_empty());
        assert_eq!(args.keys().collect::<Vec<_>>(), ["LoadAwareScheduling"]);
    }

    #[test]
    fn chart_args_are_all_supported() {
        let raw = json!({"enablePreemption": true, "awareNetworkTopology": true});
        assert!(unsupported_args("Reservation", Some(&raw)).is_empty());
        // Koordinator's chart sets awareNetworkTopology; it runs without a warning (a gang
        // that asks for a topology is warned about when it is scheduled).
        assert!(unsupported_args("Coscheduling", Some(&raw)).is_empty());
        assert!(unsupported_args("LoadAwareScheduling", Some(&raw)).is_empty());
        assert!(unsupported_args("Reservation", None).is_empty());
    }
}
