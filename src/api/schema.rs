//! Schema helpers shared by the CRD types.
//!
//! kube-derive builds CRD schemas with schemars; these helpers cover the places where
//! Koordinator's CRDs are schemaless (`x-kubernetes-preserve-unknown-fields`) and the
//! manual CRDs (kinds whose shape kube-derive cannot express).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// `type: object` with every unknown field kept, like `+kubebuilder:validation:Schemaless`
/// combined with `+kubebuilder:pruning:PreserveUnknownFields`.
pub fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A free-form JSON map (Koordinator's `ExtensionsMap`).
pub fn extensions_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// The generator settings kube-derive uses, so hand-written CRDs get the same structural
/// schemas as derived ones.
pub fn crd_generator() -> SchemaGenerator {
    schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .with_transform(kube::core::schema::OptionalIntOrString)
        .into_generator()
}

/// Marks a field's `default` as Koordinator's `+kubebuilder:default` (schemars writes a
/// `default` for every `#[serde(default)]` field; controller-gen only for the marker).
pub const DEFAULT_MARKER: &str = "x-koord-default";
/// Marks a field as Koordinator's `+nullable` (schemars makes every `Option` nullable;
/// controller-gen only the marked fields).
pub const NULLABLE_MARKER: &str = "x-koord-nullable";

/// apimachinery's `resource.Quantity` pattern, as controller-gen writes it.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The structural schema of the kind `K`, written as controller-gen writes Koordinator's
/// CRDs: the root's `apiVersion`, `kind` and `metadata`; no `nullable` or `default` but
/// the marked ones; quantities and int-or-strings as `anyOf` integer/string; and the
/// markers apimachinery's types carry (atomic selectors and references, condition rules).
pub fn crd_schema<K: JsonSchema>() -> JSONSchemaProps {
    let schema = crd_generator().into_root_schema_for::<K>();
    let mut v = serde_json::to_value(schema).unwrap_or_default();
    if let Some(root) = v.as_object_mut() {
        root.remove("$schema");
        let props = root
            .entry("properties")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(props) = props.as_object_mut() {
            props.insert("apiVersion".into(), string_prop(API_VERSION_DOC));
            props.insert("kind".into(), string_prop(KIND_DOC));
            props.insert("metadata".into(), serde_json::json!({"type": "object"}));
        }
    }
    as_controller_gen(&mut v);
    serde_json::from_value(v).unwrap_or_default()
}

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object.\nServers should convert recognized schemas to the latest internal value, and\nmay reject unrecognized values.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents.\nServers may infer this from the endpoint the client submits requests to.\nCannot be updated.\nIn CamelCase.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

fn string_prop(doc: &str) -> serde_json::Value {
    serde_json::json!({"description": doc, "type": "string"})
}

/// Rewrites one schema node and everything under it (see [`crd_schema`]).
pub fn as_controller_gen(v: &mut serde_json::Value) {
    use serde_json::{Value, json};
    let Some(o) = v.as_object_mut() else { return };
    o.remove("title");
    o.remove("nullable");
    o.remove("default");
    if let Some(d) = o.remove(DEFAULT_MARKER) {
        o.insert("default".into(), d);
    }
    if o.remove(NULLABLE_MARKER).is_some() {
        o.insert("nullable".into(), Value::Bool(true));
    }
    if o.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        o.insert(
            "anyOf".into(),
            json!([{"type": "integer"}, {"type": "string"}]),
        );
        let quantity = o
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|d| d.starts_with("Quantity is a fixed-point"));
        if quantity {
            // apimachinery's own doc, 2 KB at every quantity; the field's doc says more.
            o.remove("description");
            o.insert("pattern".into(), QUANTITY_PATTERN.into());
        }
    }
    apimachinery_markers(o);
    for key in ["items", "additionalProperties"] {
        if let Some(child) = o.get_mut(key) {
            as_controller_gen(child);
        }
    }
    for key in ["properties"] {
        if let Some(Value::Object(props)) = o.get_mut(key) {
            props.values_mut().for_each(as_controller_gen);
        }
    }
    for key in ["anyOf", "allOf", "oneOf"] {
        if let Some(Value::Array(xs)) = o.get_mut(key) {
            xs.iter_mut().for_each(as_controller_gen);
        }
    }
}

/// The markers apimachinery's Go types carry, which k8s-openapi's schemas lack: a
/// `LabelSelector` and an `ObjectReference` are atomic, a `metav1.Condition` has its
/// required fields and their rules. Recognised by their exact set of properties.
fn apimachinery_markers(o: &mut serde_json::Map<String, serde_json::Value>) {
    use serde_json::json;
    let keys: Vec<&str> = match o.get("properties").and_then(|p| p.as_object()) {
        Some(p) => p.keys().map(String::as_str).collect(),
        None => return,
    };
    let mut keys = keys;
    keys.sort_unstable();
    const SELECTOR: &[&str] = &["matchExpressions", "matchLabels"];
    const REFERENCE: &[&str] = &[
        "apiVersion",
        "fieldPath",
        "kind",
        "name",
        "namespace",
        "resourceVersion",
        "uid",
    ];
    const CONDITION: &[&str] = &[
        "lastTransitionTime",
        "message",
        "observedGeneration",
        "reason",
        "status",
        "type",
    ];
    if keys == SELECTOR {
        o.insert("x-kubernetes-map-type".into(), "atomic".into());
        let exprs = &mut o["properties"]["matchExpressions"];
        exprs["x-kubernetes-list-type"] = "atomic".into();
        exprs["items"]["required"] = json!(["key", "operator"]);
        exprs["items"]["properties"]["values"]["x-kubernetes-list-type"] = "atomic".into();
    } else if keys.contains(&"dryRun") && keys.contains(&"propagationPolicy") {
        // metav1.DeleteOptions
        o["properties"]["dryRun"]["x-kubernetes-list-type"] = "atomic".into();
    } else if keys == REFERENCE {
        o.insert("x-kubernetes-map-type".into(), "atomic".into());
    } else if keys == CONDITION {
        let p = &mut o["properties"];
        p["message"]["maxLength"] = 32768.into();
        p["observedGeneration"]["minimum"] = 0.into();
        p["reason"]["maxLength"] = 1024.into();
        p["reason"]["minLength"] = 1.into();
        p["reason"]["pattern"] = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$".into();
        p["status"]["enum"] = json!(["True", "False", "Unknown"]);
        p["type"]["maxLength"] = 316.into();
        p["type"]["pattern"] = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$".into();
        o.insert(
            "required".into(),
            json!(["lastTransitionTime", "message", "reason", "status", "type"]),
        );
    }
}

/// `type: object` with no properties: a Go struct without fields (its unknown fields are
/// pruned).
pub fn empty_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

/// Any JSON value kept as it is (`+kubebuilder:pruning:PreserveUnknownFields` on a
/// `runtime.RawExtension`-like field: no `type`).
pub fn preserve_unknown_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"x-kubernetes-preserve-unknown-fields": true})
}
