//! APIService helpers: API keys made with the admin CLI, and `APIServiceClient`s over
//! either transport, authenticated the way pipectl is (`authorization: API-KEY <key>`).

use tonic::Status;
use wisp_proto::apiservice::api_service_client::ApiServiceClient;

use super::{Authenticated, Via, Wisp, json_str};

/// The generated APIService client over either transport.
pub type ApiClient = ApiServiceClient<Authenticated>;

/// An API key as `wisp api-key add --json` printed it.
#[derive(Debug, Clone)]
pub struct ApiKey {
    pub id: String,
    /// The full `<id>.<secret>` string pipectl takes with `--api-key`.
    pub key: String,
}

impl ApiKey {
    /// `API-KEY <id>.<secret>`.
    pub fn authorization(&self) -> String {
        format!("API-KEY {}", self.key)
    }
}

impl Wisp {
    /// `wisp api-key add --project <project> --name <name> --role <role> --json`.
    pub fn add_api_key(&self, project: &str, name: &str, role: &str) -> ApiKey {
        let out = self.cli_json(&[
            "api-key",
            "add",
            "--project",
            project,
            "--name",
            name,
            "--role",
            role,
        ]);
        let key = ApiKey {
            id: json_str(&out, "id"),
            key: json_str(&out, "key"),
        };
        assert!(key.key.starts_with(&format!("{}.", key.id)), "{key:?}");
        key
    }

    /// A client that sends `authorization` (or no credentials at all).
    pub async fn api_client(&self, via: Via, authorization: Option<&str>) -> ApiClient {
        ApiServiceClient::new(self.transport(via, authorization).await)
    }

    /// A client authenticated with `key`.
    pub async fn api_key_client(&self, via: Via, key: &ApiKey) -> ApiClient {
        self.api_client(via, Some(&key.authorization())).await
    }
}

/// One unary APIService call under upstream's legacy service name
/// (`/pipe.api.service.apiservice.APIService/<method>`), which the server aliases.
pub async fn legacy_api_call<Req, Resp>(
    transport: Authenticated,
    method: &str,
    request: Req,
) -> Result<Resp, Status>
where
    Req: tonic_prost::prost::Message + Send + Sync + 'static,
    Resp: tonic_prost::prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(transport);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("transport not ready: {e}")))?;
    let path: http::uri::PathAndQuery = format!("/pipe.api.service.apiservice.APIService/{method}")
        .parse()
        .expect("a valid path");
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    grpc.unary(tonic::Request::new(request), path, codec)
        .await
        .map(tonic::Response::into_inner)
}
