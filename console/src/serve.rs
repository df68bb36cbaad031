//! Starting a console: the checks that keep it off the network without
//! authentication and TLS, binding, and serving (plain HTTP on loopback, or TLS).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, ServerConfig};
use tooltrust::quarantine::Kek;
use tooltrust_store::Store;

use crate::keys::ReviewerKeys;

use crate::access::{Access, Credentials};
use crate::app::App;
use crate::routes;
use crate::token::Token;

/// Decisions one reviewer may make per minute, unless the console is told otherwise.
pub const DEFAULT_DECISIONS_PER_MINUTE: u32 = 30;

/// The address a console listens on unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

/// A TLS certificate chain and its private key, as PEM files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key (PKCS #8, PKCS #1 or SEC1).
    pub key: PathBuf,
}

/// What a console serves, where, and to whom.
#[derive(Debug)]
pub struct Config {
    /// The store whose queue and chain it shows.
    pub store: Store,
    /// Where it listens.
    pub listen: SocketAddr,
    /// Who may use it.
    pub access: Access,
    /// TLS; required on any address but loopback.
    pub tls: Option<TlsFiles>,
    /// Decisions one reviewer may make per minute.
    pub decisions_per_minute: u32,
    /// The key-encryption key of the quarantine, to decrypt outputs for review (none:
    /// the console shows that outputs exist, never their bytes).
    pub kek: Option<Kek>,
    /// The reviewers' signing keys: a decision is signed with its reviewer's key, and a
    /// reviewer without one here cannot decide in this console.
    pub keys: ReviewerKeys,
}

impl Config {
    /// A loopback console at [`DEFAULT_LISTEN`] for the person named `reviewer`, who
    /// signs in with the token the console draws when it binds ([`Console::token`]).
    pub fn loopback(store: Store, reviewer: tooltrust::Id) -> Config {
        Config {
            store,
            listen: DEFAULT_LISTEN
                .parse()
                .unwrap_or_else(|_| unreachable!("a valid address")),
            access: Access::Reviewer(reviewer),
            tls: None,
            decisions_per_minute: DEFAULT_DECISIONS_PER_MINUTE,
            kek: None,
            keys: ReviewerKeys::new(),
        }
    }
}

/// Why a console did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A console off the loopback interface must authenticate its reviewers.
    #[error(
        "{0} is not a loopback address: a console reachable from other machines needs --auth FILE (a bearer token or argon2 hash per reviewer) and TLS (--tls-cert, --tls-key); --reviewer is only for 127.0.0.1 or ::1"
    )]
    NeedsAuth(SocketAddr),
    /// A console off the loopback interface must use TLS.
    #[error(
        "{0} is not a loopback address: a console reachable from other machines needs TLS: give --tls-cert FILE and --tls-key FILE"
    )]
    NeedsTls(SocketAddr),
    /// No decision could ever be made.
    #[error("decisions per minute must be at least 1")]
    NoDecisions,
    /// The certificate or key cannot be used.
    #[error("TLS: {0}")]
    Tls(String),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// No randomness for the console's keys.
    #[error("no randomness for the console's keys: {0}")]
    Random(String),
    /// The token of a console for one reviewer cannot be prepared.
    #[error("cannot prepare the console's sign-in token: {0}")]
    Token(String),
}

/// A console, bound and ready to serve.
pub struct Console {
    listener: TcpListener,
    app: Arc<App>,
    tls: Option<TlsAcceptor>,
    /// The token of a console for one reviewer.
    token: Option<Token>,
}

impl Console {
    /// Checks `config` and binds its address: refuses a non-loopback address without
    /// authentication and TLS. A console for one reviewer ([`Access::Reviewer`]) draws
    /// its token here.
    pub async fn bind(config: Config) -> Result<Console, StartError> {
        if config.decisions_per_minute == 0 {
            return Err(StartError::NoDecisions);
        }
        if !config.listen.ip().is_loopback() {
            if !matches!(config.access, Access::Credentials(_)) {
                return Err(StartError::NeedsAuth(config.listen));
            }
            if config.tls.is_none() {
                return Err(StartError::NeedsTls(config.listen));
            }
        }
        let tls = config.tls.as_ref().map(acceptor).transpose()?;
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| StartError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let local = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.listen,
            source,
        })?;
        // One reviewer proves it with a token drawn now; no request is served as them
        // for coming from the loopback address, which any local user can connect to.
        let (credentials, token) = match config.access {
            Access::Reviewer(reviewer) => {
                let token = Token::random().map_err(|e| StartError::Token(e.to_string()))?;
                let credentials =
                    Credentials::single(reviewer, &token).map_err(StartError::Token)?;
                (credentials, Some(token))
            }
            Access::Credentials(credentials) => (credentials, None),
        };
        let mut app = App::new(
            config.store,
            credentials,
            token.is_some(),
            config.decisions_per_minute,
            tls.is_some(),
            config.kek,
        )
        .map_err(|e| StartError::Random(e.to_string()))?;
        app.keys = config.keys;
        app.port = local.port();
        if local.ip().is_loopback() {
            app.hosts = Some(loopback_hosts(local, tls.is_some()));
        }
        Ok(Console {
            listener,
            app: Arc::new(app),
            tls,
            token,
        })
    }

    /// The token of a console for one reviewer ([`Access::Reviewer`]), which every
    /// request must carry (or the session it was exchanged for); `None` for a console
    /// with credentials. Give it to that reviewer only, e.g. in a file only they read
    /// ([`Token::write_file`]).
    pub fn token(&self) -> Option<&Token> {
        self.token.as_ref()
    }

    /// The address that signs the reviewer in: for a console for one reviewer, its
    /// sign-in page with the token (`http://127.0.0.1:PORT/login?token=…`), which
    /// exchanges it for a session cookie and goes on to the queue; otherwise the
    /// sign-in page. It holds the secret: show it to that reviewer only.
    pub fn sign_in_url(&self) -> io::Result<String> {
        let url = self.url()?;
        Ok(match &self.token {
            Some(token) => format!("{url}login?token={}", token.secret()),
            None => format!("{url}login"),
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The URL of its queue.
    pub fn url(&self) -> io::Result<String> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        Ok(format!("{scheme}://{}/", self.local_addr()?))
    }

    /// Sets how often live views look at the queue (one second unless told).
    pub fn poll_every(mut self, every: Duration) -> Console {
        if let Some(app) = Arc::get_mut(&mut self.app) {
            app.poll = every;
        }
        self
    }

    /// Serves until `shutdown` completes (open connections are then dropped).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        let router = routes::router(self.app);
        match self.tls {
            None => {
                let service = router.into_make_service_with_connect_info::<SocketAddr>();
                axum::serve(self.listener, service)
                    .with_graceful_shutdown(shutdown)
                    .await
            }
            Some(acceptor) => {
                tokio::pin!(shutdown);
                let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS));
                let clients = Arc::new(PerClient::default());
                loop {
                    let (slot, (tcp, peer)) = tokio::select! {
                        () = &mut shutdown => return Ok(()),
                        accepted = accept(&self.listener, &slots) => accepted,
                    };
                    // One address may not take every slot (a slow client holds its own).
                    let Some(client_slot) = clients.enter(peer.ip()) else {
                        continue;
                    };
                    let acceptor = acceptor.clone();
                    let router = router
                        .clone()
                        .layer(axum::Extension(axum::extract::ConnectInfo(peer)));
                    tokio::spawn(async move {
                        let _slots = (slot, client_slot);
                        let handshake = tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp));
                        let Ok(Ok(stream)) = handshake.await else {
                            return;
                        };
                        let service = hyper_util::service::TowerToHyperService::new(router);
                        let served = hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(HEADERS)
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                        if let Err(error) = served {
                            tracing::debug!(error = %error, "a console connection ended");
                        }
                    });
                }
            }
        }
    }
}

/// The Host headers a loopback console answers to: only its own names. A page of
/// another site that rebinds its name to the loopback address (DNS rebinding) still
/// sends its own name as Host, and is refused.
fn loopback_hosts(local: SocketAddr, tls: bool) -> Vec<String> {
    let port = local.port();
    let mut names = vec![
        local.to_string(),
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ];
    // A client leaves the scheme's default port out of Host.
    if port == if tls { 443 } else { 80 } {
        let ip = match local.ip() {
            std::net::IpAddr::V4(ip) => ip.to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        };
        names.extend([ip, "127.0.0.1".into(), "localhost".into(), "[::1]".into()]);
    }
    names.dedup();
    names
}

/// How long a client has to finish the TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// How long a client has to send a request's headers.
const HEADERS: Duration = Duration::from_secs(30);

/// Connections served at once; more wait in the listener's backlog.
const CONNECTIONS: usize = 256;

/// Connections one address may hold at once.
const CONNECTIONS_PER_CLIENT: usize = 16;

/// The connections each address holds.
#[derive(Default)]
struct PerClient(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

/// One connection of an address, counted until dropped.
struct ClientSlot {
    clients: Arc<PerClient>,
    ip: std::net::IpAddr,
}

impl PerClient {
    fn enter(self: &Arc<Self>, ip: std::net::IpAddr) -> Option<ClientSlot> {
        let mut held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = held.entry(ip).or_default();
        if *count >= CONNECTIONS_PER_CLIENT {
            return None;
        }
        *count += 1;
        Some(ClientSlot {
            clients: self.clone(),
            ip,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut held = self
            .clients
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// The pause after a failed accept (out of file descriptors: retrying at once would spin).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The next connection, once a slot for it is free (`None`: the semaphore was closed,
/// which this console never does).
async fn accept(
    listener: &TcpListener,
    slots: &Arc<tokio::sync::Semaphore>,
) -> (
    Option<tokio::sync::OwnedSemaphorePermit>,
    (tokio::net::TcpStream, SocketAddr),
) {
    let slot = slots.clone().acquire_owned().await.ok();
    loop {
        match listener.accept().await {
            Ok(accepted) => return (slot, accepted),
            Err(error) => {
                tracing::warn!(error = %error, "the console cannot accept a connection");
                tokio::time::sleep(ACCEPT_PAUSE).await;
            }
        }
    }
}

fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, StartError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| StartError::Tls(format!("certificate {}: {e}", files.cert.display())))?;
    if certs.is_empty() {
        return Err(StartError::Tls(format!(
            "certificate {}: no certificate in the file",
            files.cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| StartError::Tls(format!("key {}: {e}", files.key.display())))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StartError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| StartError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
