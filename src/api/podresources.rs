//! The kubelet's PodResources gRPC API (`proto/podresources/v1`, package `v1`): what the
//! embedded node runtime serves as the node's kubelet, and what the koordlet's proxy
//! forwards.

pub mod pb {
    tonic::include_proto!("v1");
}
