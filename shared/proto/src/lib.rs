//! The PipeCD wire contract, generated from our own `.proto` files in `proto/`.
//! Package `model` holds the data model; each `grpc.service.*` package one service.

pub mod base64_bytes;

pub mod model {
    tonic::include_proto!("model");
}

pub mod grpc {
    pub mod service {
        pub mod pipedservice {
            tonic::include_proto!("grpc.service.pipedservice");
        }
        pub mod apiservice {
            tonic::include_proto!("grpc.service.apiservice");
        }
        pub mod webservice {
            tonic::include_proto!("grpc.service.webservice");
        }
    }
}

pub use grpc::service::{apiservice, pipedservice, webservice};
