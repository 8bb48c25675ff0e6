//! koord's RuntimeHookService (`proto/runtime/v1alpha1/api.proto`), wire-compatible with
//! Koordinator's `apis/runtime/v1alpha1/api.proto`: the runtime proxy calls it, the
//! koordlet serves it.
#![allow(clippy::all, clippy::pedantic)]

tonic::include_proto!("runtime.v1alpha1");
