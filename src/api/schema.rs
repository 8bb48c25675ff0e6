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

/// Structural schema of `T` as CRD `JSONSchemaProps`.
pub fn props_for<T: JsonSchema>() -> JSONSchemaProps {
    let schema = crd_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or_default();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("title");
        obj.remove("$schema");
    }
    serde_json::from_value(value).unwrap_or_default()
}
