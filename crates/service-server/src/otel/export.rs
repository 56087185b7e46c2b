//! The OTLP exporter's HTTP client: the workspace's reqwest (rustls on ring), not a
//! second HTTP stack. The SDK's batch processor exports from a thread of its own, so
//! each POST is handed to the server's tokio runtime and awaited from there.

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use tokio::runtime::Handle;

/// How long one export may take (OTLP's default timeout).
const EXPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug)]
pub(super) struct Client {
    client: reqwest::Client,
    runtime: Handle,
}

impl Client {
    /// A client posting on the current tokio runtime.
    pub(super) fn new() -> Result<Self, reqwest::Error> {
        Ok(Self {
            client: reqwest::Client::builder()
                .timeout(EXPORT_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
            runtime: Handle::current(),
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let request = reqwest::Request::try_from(request)?;
        let sent = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let mut answer = Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            Ok::<_, HttpError>(answer.body(response.bytes().await?)?)
        });
        sent.await?
    }
}
