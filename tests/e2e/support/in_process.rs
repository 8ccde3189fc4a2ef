//! An in-process Wisp server for tests that need no second process: the control plane
//! `wisp serve` runs (PipedService, APIService, WebService and the console), served by the
//! same builder (`wisp_app::server`: its layers, bounds and defaults), on embedded stores
//! in a temporary directory. Stopped (gracefully, through the builder's shutdown) by
//! [`InProcess::stop`], or aborted on drop.

use std::net::SocketAddr;
use std::sync::Arc;

use tempfile::TempDir;
use tokio::sync::oneshot;
use tonic::service::Routes;
use wisp_app::server::{Server, ServerError, ServerOptions};
use wisp_app::{App, ConsoleOptions};

/// Signs the console's sessions.
const KEY: &[u8] = b"in-process-test-key-in-process-test-key";

/// A running in-process server.
pub struct InProcess {
    pub addr: SocketAddr,
    pub app: Arc<App>,
    _dir: TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), ServerError>>>,
}

impl InProcess {
    /// Starts a server on 127.0.0.1:0 with `wisp serve`'s defaults.
    pub async fn start() -> InProcess {
        Self::start_with(ServerOptions::default()).await
    }

    /// Starts a server on 127.0.0.1:0 with `options`.
    pub async fn start_with(options: ServerOptions) -> InProcess {
        let dir = tempfile::tempdir().expect("temporary directory");
        let config = wisp_config::Config::default_embedded(dir.path());
        let stores = wisp_app::stores::open(&config, dir.path())
            .await
            .expect("open the embedded stores");
        let key = wisp_config::EncryptionKey::from_bytes(KEY.to_vec()).expect("a key");
        let app = App::from_parts(config, false, stores, Some(key));
        let web_api = app.web_api();
        let console = app
            .console(web_api.clone(), ConsoleOptions::default())
            .expect("the console");
        let routes = Routes::new(app.piped_grpc().into_server())
            .add_service(app.api_grpc().into_server())
            .add_service(app.web_grpc(web_api).expect("WebService").into_server());
        let server = Server::bind(([127, 0, 0, 1], 0).into(), options)
            .await
            .expect("bind 127.0.0.1:0");
        let addr = server.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run_until(routes, Arc::new(console), async {
            let _ = stopped.await;
        }));
        InProcess {
            addr,
            app: Arc::new(app),
            _dir: dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Asks the server to stop and waits until it has (what `wisp serve` does on SIGTERM).
    pub async fn stop(mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.expect("the server task"),
            None => Ok(()),
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
