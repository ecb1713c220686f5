//! A small etcd v3 client over tonic: the KV requests the store makes,
//! authentication with a user and password (the token renewed when etcd
//! forgets it), the Auth RPCs that set authentication up, and a watch of a
//! prefix. TLS is rustls with ring; the servers are verified against the
//! CA bundle of [`EtcdTls`] only.
//!
//! ```no_run
//! # async fn f() -> Result<(), pki_etcd::client::Error> {
//! use pki_etcd::client::{Client, GetOptions};
//! let url = pki_etcd::EtcdUrl::parse("etcd://127.0.0.1:2379/pki")?;
//! let client = Client::connect(&url, &pki_etcd::EtcdOptions::default()).await?;
//! let answer = client.kv().get("pki/", Some(GetOptions::new().with_prefix())).await?;
//! println!("{} keys", answer.kvs().len());
//! # Ok(()) }
//! ```

mod diagnose;
mod ops;
mod route;

pub(crate) use diagnose::diagnose;
use route::Route;
pub(crate) use route::never_sent;

pub use crate::proto::etcdserverpb::{ResponseHeader, WatchResponse};
pub use crate::proto::mvccpb::{Event, KeyValue};
pub use ops::{
    Compare, CompareOp, DeleteOptions, DeleteResponse, GetOptions, GetResponse, PutOptions,
    PutResponse, Txn, TxnOp, TxnOpResponse, TxnResponse,
};

use crate::EtcdOptions;
use crate::options::{EtcdTls, EtcdUser};
use crate::proto::authpb;
use crate::proto::etcdserverpb::{self as pb, auth_client, kv_client, watch_client};
use crate::url::EtcdUrl;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// Why a request, or connecting, failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// etcd (or the gRPC layer on the way) answered with this status.
    GRpcStatus(tonic::Status),
    /// The channel could not be set up (bad TLS material, bad address).
    TransportError(tonic::transport::Error),
    /// The arguments cannot be used (and nothing was sent).
    InvalidArgs(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::GRpcStatus(s) => write!(f, "{:?}: {}", s.code(), s.message()),
            Error::TransportError(e) => write!(f, "transport error: {e}"),
            Error::InvalidArgs(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::GRpcStatus(s) => std::error::Error::source(s),
            Error::TransportError(e) => std::error::Error::source(e),
            Error::InvalidArgs(_) => None,
        }
    }
}

impl From<tonic::Status> for Error {
    fn from(s: tonic::Status) -> Self {
        Error::GRpcStatus(s)
    }
}

impl From<crate::UrlError> for Error {
    fn from(e: crate::UrlError) -> Self {
        Error::InvalidArgs(e.to_string())
    }
}

/// The token etcd issued for the user, sent with every request but
/// `Authenticate` itself.
type Token = Arc<RwLock<Option<MetadataValue<Ascii>>>>;

#[derive(Clone)]
struct AddToken(Token);

impl tonic::service::Interceptor for AddToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let authenticating = request
            .extensions()
            .get::<tonic::GrpcMethod>()
            .is_some_and(|m| m.method() == "Authenticate");
        if !authenticating
            && let Ok(token) = self.0.read()
            && let Some(token) = token.as_ref()
        {
            request.metadata_mut().insert("token", token.clone());
        }
        Ok(request)
    }
}

type Transport = InterceptedService<Channel, AddToken>;

/// A connection to an etcd cluster, shared by every clone: a channel per
/// endpoint; a request goes to the endpoint that answered last, and on to
/// the next ones while the connection to one cannot be made (see the
/// private `route` function).
#[derive(Clone)]
pub struct Client {
    route: Arc<Route<Transport>>,
    session: Arc<Session>,
    max_decoding: usize,
}

/// Who the client is, and the token etcd gave it.
struct Session {
    user: Option<EtcdUser>,
    token: Token,
    route: Arc<Route<Transport>>,
    /// One renewal at a time: requests that all find the token stale wait
    /// for the first one's.
    renewing: tokio::sync::Mutex<()>,
}

impl Client {
    /// Connects to the endpoints of `url` (TLS for `etcds://`, with
    /// `options.tls`) and, with `options.user`, authenticates within
    /// `options.connect_timeout`. The channels connect when the first
    /// request is sent; every request is bounded by
    /// `options.request_timeout`. With several endpoints, connecting to
    /// each may take an equal share of the shorter of the two timeouts, so
    /// that a request tries them all within its own.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgs`] for an `etcds://` URL without `options.tls`,
    ///   TLS settings for an `etcd://` URL, or a URL that names no endpoint;
    /// - [`Error::TransportError`] when an endpoint is not a valid address or
    ///   the TLS settings cannot be applied;
    /// - with `options.user`, [`Error::GRpcStatus`] when authentication fails
    ///   (a wrong password, no endpoint reached) or has no answer within
    ///   `options.connect_timeout` (`DeadlineExceeded`), and
    ///   [`Error::InvalidArgs`] when etcd sends a token that is not ASCII.
    ///
    /// Without a user nothing is sent, so an unreachable server shows at the
    /// first request.
    pub async fn connect(url: &EtcdUrl, options: &EtcdOptions) -> Result<Client, Error> {
        let tls = match (url.tls(), &options.tls) {
            (true, Some(tls)) => Some(tls_config(tls)?),
            (true, None) => {
                return Err(Error::InvalidArgs(
                    "an etcds:// store needs the CA bundle that verifies its servers".into(),
                ));
            }
            (false, Some(_)) => {
                return Err(Error::InvalidArgs(
                    "TLS settings were given for a plaintext etcd:// store: use etcds://".into(),
                ));
            }
            (false, None) => None,
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let token: Token = Arc::default();
        let mut transports = Vec::new();
        let share = connect_share(options, url.endpoints().len());
        for host_port in url.endpoints() {
            let mut endpoint = Endpoint::from_shared(format!("{scheme}://{host_port}"))
                .map_err(Error::TransportError)?
                .connect_timeout(share)
                .timeout(options.request_timeout)
                .http2_keep_alive_interval(Duration::from_secs(10))
                .keep_alive_timeout(options.request_timeout);
            if let Some(tls) = &tls {
                endpoint = endpoint
                    .tls_config(tls.clone())
                    .map_err(Error::TransportError)?;
            }
            let channel = endpoint.connect_lazy();
            transports.push(InterceptedService::new(channel, AddToken(token.clone())));
        }
        if transports.is_empty() {
            return Err(Error::InvalidArgs("the store URL names no endpoint".into()));
        }
        let route = Arc::new(Route::new(transports));
        let session = Arc::new(Session {
            user: options.user.clone(),
            token,
            route: route.clone(),
            renewing: tokio::sync::Mutex::new(()),
        });
        let client = Client {
            route,
            session,
            max_decoding: 4 << 20,
        };
        if client.session.user.is_some() {
            let limit = options.connect_timeout;
            match tokio::time::timeout(limit, client.session.authenticate()).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(Error::GRpcStatus(tonic::Status::deadline_exceeded(
                        format!("no answer to authentication within {limit:?}"),
                    )));
                }
            }
        }
        Ok(client)
    }

    /// The same client, accepting answers up to `limit` bytes (tonic's
    /// default is 4 MiB).
    pub fn max_decoding_message_size(mut self, limit: usize) -> Self {
        self.max_decoding = limit;
        self
    }

    /// The KV service.
    pub fn kv(&self) -> KvClient {
        KvClient {
            max_decoding: self.max_decoding,
            session: self.session.clone(),
        }
    }

    /// The Auth service: users, roles and turning authentication on.
    pub fn auth(&self) -> AuthClient {
        AuthClient {
            session: self.session.clone(),
        }
    }

    /// Watches every key under `prefix` from `start_revision` (0: from
    /// now): each answer lists the changes of one or more revisions. The
    /// watch lasts as long as the stream is read.
    ///
    /// # Errors
    ///
    /// [`Error::GRpcStatus`] when no endpoint can be reached or etcd refuses
    /// the watch. Right after the server restarted, the first request on
    /// the old connection may fail with a transport error: opening the
    /// watch again is safe (with a user too: `tests/tls.rs` opens one with
    /// the token of before the restart).
    pub async fn watch_prefix(
        &self,
        prefix: impl Into<Vec<u8>>,
        start_revision: i64,
    ) -> Result<tonic::Streaming<WatchResponse>, Error> {
        let key = prefix.into();
        let create = pb::WatchCreateRequest {
            range_end: ops::prefix_range_end(&key),
            key,
            start_revision,
            ..pb::WatchCreateRequest::default()
        };
        let request = pb::WatchRequest {
            request_union: Some(pb::watch_request::RequestUnion::CreateRequest(create)),
        };
        // The request stream stays open: etcd ends a watch whose client
        // stops sending.
        let limit = self.max_decoding;
        let watch = self
            .route
            .send(|transport| {
                let requests = tokio_stream::StreamExt::chain(
                    tokio_stream::iter([request.clone()]),
                    tokio_stream::pending(),
                );
                let mut watch =
                    watch_client::WatchClient::new(transport).max_decoding_message_size(limit);
                async move { watch.watch(requests).await }
            })
            .await?;
        Ok(watch.into_inner())
    }
}

/// How long connecting to one endpoint may take: all of the connect timeout
/// for one endpoint; with several, an equal share of the shorter of the
/// connect and request timeouts, so that a request reaches the last
/// endpoint before its own time runs out.
fn connect_share(options: &EtcdOptions, endpoints: usize) -> Duration {
    match u32::try_from(endpoints) {
        Ok(0 | 1) => options.connect_timeout,
        Ok(n) => options.connect_timeout.min(options.request_timeout) / n,
        Err(_) => options.connect_timeout,
    }
}

impl Session {
    async fn authenticate(&self) -> Result<(), Error> {
        let Some(user) = &self.user else {
            return Ok(());
        };
        let request = pb::AuthenticateRequest {
            name: user.name.clone(),
            password: user.password.to_string(),
        };
        let answer = self
            .route
            .send(|transport| {
                let mut auth = auth_client::AuthClient::new(transport);
                let request = request.clone();
                async move { auth.authenticate(request).await }
            })
            .await?
            .into_inner();
        let token = MetadataValue::try_from(answer.token.as_str())
            .map_err(|_| Error::InvalidArgs("etcd sent a token that is not ASCII".into()))?;
        if let Ok(mut slot) = self.token.write() {
            *slot = Some(token);
        }
        Ok(())
    }

    /// Whether `status` says the token is unknown or expired (etcd forgets
    /// its tokens when it restarts), so that authenticating again and
    /// resending is worth it. etcd refused the request: it was not applied.
    fn token_is_stale(&self, status: &tonic::Status) -> bool {
        self.user.is_some()
            && status.code() == tonic::Code::Unauthenticated
            && status.message().contains("invalid auth token")
    }

    /// Authenticates again unless another request did since `seen`.
    async fn renew(&self, seen: Option<MetadataValue<Ascii>>) -> Result<(), Error> {
        let _one_at_a_time = self.renewing.lock().await;
        let current = self.token.read().ok().and_then(|t| t.clone());
        if current != seen {
            return Ok(());
        }
        self.authenticate().await
    }

    fn current(&self) -> Option<MetadataValue<Ascii>> {
        self.token.read().ok().and_then(|t| t.clone())
    }
}

/// Sends `request` with `send`; when etcd says the token is stale,
/// authenticates again and sends it once more.
async fn with_token<Req: Clone, Resp, F, Fut>(
    session: &Session,
    request: Req,
    send: F,
) -> Result<Resp, Error>
where
    F: Fn(Req) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
{
    if session.user.is_none() {
        return Ok(send(request).await?.into_inner());
    }
    let seen = session.current();
    match send(request.clone()).await {
        Err(status) if session.token_is_stale(&status) => {
            session.renew(seen).await?;
            Ok(send(request).await?.into_inner())
        }
        answer => Ok(answer?.into_inner()),
    }
}

/// Sends `request` with `call` on a client of one service, made by `make`
/// for the endpoint the route picks ([`Route::send`]), with the token
/// ([`with_token`]).
async fn call<C, Req: Clone, Resp, Fut>(
    session: &Session,
    request: Req,
    make: impl Fn(Transport) -> C,
    call: impl Fn(C, Req) -> Fut,
) -> Result<Resp, Error>
where
    Fut: std::future::Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
{
    let (make, call) = (&make, &call);
    with_token(session, request, move |r| {
        session
            .route
            .send(move |transport| call(make(transport), r.clone()))
    })
    .await
}

type Kv = kv_client::KvClient<Transport>;
type Auth = auth_client::AuthClient<Transport>;

/// The KV service: reads, writes, deletions, transactions and compaction.
#[derive(Clone)]
pub struct KvClient {
    max_decoding: usize,
    session: Arc<Session>,
}

impl KvClient {
    /// The same client, accepting answers up to `limit` bytes.
    pub fn max_decoding_message_size(mut self, limit: usize) -> Self {
        self.max_decoding = limit;
        self
    }

    fn make(&self) -> impl Fn(Transport) -> Kv + use<> {
        let limit = self.max_decoding;
        move |transport| Kv::new(transport).max_decoding_message_size(limit)
    }

    /// Reads `key`, or the range `options` describes.
    ///
    /// # Errors
    ///
    /// [`Error::GRpcStatus`] with etcd's status (such as `PermissionDenied`, or
    /// `OutOfRange` for a compacted revision), or the last endpoint's failure
    /// when none can be reached or the request timeout passes. A stale token is
    /// renewed and the request sent once more; a failed renewal is its error.
    pub async fn get(
        &mut self,
        key: impl Into<Vec<u8>>,
        options: Option<GetOptions>,
    ) -> Result<GetResponse, Error> {
        let request = options.unwrap_or_default().request(key.into());
        call(
            &self.session,
            request,
            self.make(),
            |mut kv, r| async move { kv.range(r).await },
        )
        .await
        .map(GetResponse)
    }

    /// Writes `value` at `key`.
    ///
    /// # Errors
    ///
    /// As for [`KvClient::get`]: [`Error::GRpcStatus`] when etcd refuses the
    /// write or cannot be reached. A request that timed out may still have been
    /// applied.
    pub async fn put(
        &mut self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        options: Option<PutOptions>,
    ) -> Result<PutResponse, Error> {
        let request = ops::put_request(key.into(), value.into(), options);
        call(
            &self.session,
            request,
            self.make(),
            |mut kv, r| async move { kv.put(r).await },
        )
        .await
        .map(PutResponse)
    }

    /// Deletes `key`, or the range `options` describes.
    ///
    /// # Errors
    ///
    /// As for [`KvClient::put`].
    pub async fn delete(
        &mut self,
        key: impl Into<Vec<u8>>,
        options: Option<DeleteOptions>,
    ) -> Result<DeleteResponse, Error> {
        let request = options.unwrap_or_default().request(key.into());
        call(
            &self.session,
            request,
            self.make(),
            |mut kv, r| async move { kv.delete_range(r).await },
        )
        .await
        .map(DeleteResponse)
    }

    /// Runs a transaction.
    ///
    /// # Errors
    ///
    /// As for [`KvClient::put`]. A transaction whose comparisons fail is not an
    /// error: [`TxnResponse::succeeded`] is false.
    pub async fn txn(&mut self, txn: Txn) -> Result<TxnResponse, Error> {
        call(
            &self.session,
            txn.into_request(),
            self.make(),
            |mut kv, r| async move { kv.txn(r).await },
        )
        .await
        .map(TxnResponse)
    }

    /// Compacts the whole cluster's history up to `revision`: a read at an
    /// earlier revision fails as compacted from then on, and the values
    /// that only earlier revisions held are gone. With `physical`, etcd
    /// answers once they are removed from its backend, not only marked.
    /// Compaction is global to the cluster (every key, whoever wrote it).
    ///
    /// # Errors
    ///
    /// As for [`KvClient::get`]; a `revision` already compacted, or later than
    /// the current one, is etcd's `OutOfRange`.
    pub async fn compact(&mut self, revision: i64, physical: bool) -> Result<(), Error> {
        let request = pb::CompactionRequest { revision, physical };
        call(
            &self.session,
            request,
            self.make(),
            |mut kv, r| async move { kv.compact(r).await },
        )
        .await
        .map(drop)
    }
}

/// What a role may do with its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Read only.
    Read,
    /// Write only.
    Write,
    /// Read and write.
    ReadWrite,
}

/// The Auth service, to set authentication up (what `etcdctl user add`,
/// `role grant-permission` and `auth enable` do).
#[derive(Clone)]
pub struct AuthClient {
    session: Arc<Session>,
}

impl AuthClient {
    /// Adds a user with a password.
    ///
    /// # Errors
    ///
    /// [`Error::GRpcStatus`] with etcd's status (the user exists, permission
    /// denied) or the last endpoint's failure when none can be reached.
    pub async fn user_add(&mut self, name: &str, password: &str) -> Result<(), Error> {
        let request = pb::AuthUserAddRequest {
            name: name.into(),
            password: password.into(),
            ..pb::AuthUserAddRequest::default()
        };
        call(
            &self.session,
            request,
            Auth::new,
            |mut auth, r| async move { auth.user_add(r).await },
        )
        .await
        .map(drop)
    }

    /// Adds a role with no permission (`root` is etcd's own).
    ///
    /// # Errors
    ///
    /// As for [`AuthClient::user_add`] (the role exists, permission denied).
    pub async fn role_add(&mut self, name: &str) -> Result<(), Error> {
        let request = pb::AuthRoleAddRequest { name: name.into() };
        call(
            &self.session,
            request,
            Auth::new,
            |mut auth, r| async move { auth.role_add(r).await },
        )
        .await
        .map(drop)
    }

    /// Gives `role` the `permission` on every key starting with `prefix`.
    ///
    /// # Errors
    ///
    /// As for [`AuthClient::user_add`] (no such role, permission denied).
    pub async fn role_grant_prefix(
        &mut self,
        role: &str,
        prefix: &str,
        permission: Permission,
    ) -> Result<(), Error> {
        let perm_type = match permission {
            Permission::Read => authpb::permission::Type::Read,
            Permission::Write => authpb::permission::Type::Write,
            Permission::ReadWrite => authpb::permission::Type::Readwrite,
        };
        let request = pb::AuthRoleGrantPermissionRequest {
            name: role.into(),
            perm: Some(authpb::Permission {
                perm_type: perm_type as i32,
                key: prefix.as_bytes().to_vec(),
                range_end: ops::prefix_range_end(prefix.as_bytes()),
            }),
        };
        call(
            &self.session,
            request,
            Auth::new,
            |mut auth, r| async move { auth.role_grant_permission(r).await },
        )
        .await
        .map(drop)
    }

    /// Gives `user` the role `role`.
    ///
    /// # Errors
    ///
    /// As for [`AuthClient::user_add`] (no such user or role, permission
    /// denied).
    pub async fn user_grant_role(&mut self, user: &str, role: &str) -> Result<(), Error> {
        let request = pb::AuthUserGrantRoleRequest {
            user: user.into(),
            role: role.into(),
        };
        call(
            &self.session,
            request,
            Auth::new,
            |mut auth, r| async move { auth.user_grant_role(r).await },
        )
        .await
        .map(drop)
    }

    /// Turns authentication on (etcd requires the user `root` with the
    /// role `root` first).
    ///
    /// # Errors
    ///
    /// As for [`AuthClient::user_add`]; etcd refuses when the user `root` or
    /// its role `root` is missing.
    pub async fn auth_enable(&mut self) -> Result<(), Error> {
        let request = pb::AuthEnableRequest {};
        call(
            &self.session,
            request,
            Auth::new,
            |mut auth, r| async move { auth.auth_enable(r).await },
        )
        .await
        .map(drop)
    }
}

fn tls_config(tls: &EtcdTls) -> Result<ClientTlsConfig, Error> {
    let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&tls.ca_pem));
    if let Some(identity) = &tls.identity {
        config = config.identity(Identity::from_pem(&identity.cert_pem, &*identity.key_pem));
    }
    Ok(config)
}
