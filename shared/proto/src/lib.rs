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

/// Every RPC of each service, by name, read from `proto/` at build time: the tables kept
/// per RPC elsewhere (request bounds, the benches' no-op server, the simulator's calls,
/// the tests' lists) are checked against these, so an RPC added to a .proto and
/// forgotten in one of them fails a test.
pub mod rpcs {
    include!(concat!(env!("OUT_DIR"), "/rpcs.rs"));
}
