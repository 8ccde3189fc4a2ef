//! `wisp console fetch`: upstream PipeCD's built console out of its release image
//! (`ghcr.io/pipe-cd/controlplane:<version>` holds it under `web/static`), through the
//! OCI distribution API: the anonymous bearer-token flow from the registry's
//! `WWW-Authenticate` challenge, the image index → this platform's manifest → the layers,
//! every manifest and blob checked against its sha256 digest, and only `web/static/**`
//! unpacked (src/cli/console_layers.rs), into a temporary directory that is renamed into
//! place when everything went through.
//!
//! A small client on hyper (one HTTP/1.1 connection per request, as `wisp doctor`) rather
//! than a registry crate: the maintained one (`oci-client`) brings reqwest, a second HTTP
//! client and TLS set-up, into this binary, and its `ClientConfig` offers read and connect
//! timeouts but no bound on sizes, no deadline for a whole pull and no rule on where the
//! token realm may be; here every read is bounded in size and in time, and the realm must
//! be the registry's own site.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{StatusCode, Uri, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::console_layers::{LayerError, UnpackLimits, Unpacker};

/// Upstream's release images, tagged by release (`v0.57.1`).
pub const DEFAULT_REPOSITORY: &str = "ghcr.io/pipe-cd/controlplane";
/// Most redirects followed for one request (registries send blobs to a CDN).
const MAX_REDIRECTS: usize = 5;
/// Most bytes of a token answer.
const MAX_TOKEN_BYTES: u64 = 64 * 1024;
const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// What one fetch may download, unpack, and wait.
#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    pub unpack: UnpackLimits,
    /// Bytes of one manifest or index.
    pub max_manifest_bytes: u64,
    /// Bytes of one layer as downloaded (compressed).
    pub max_layer_bytes: u64,
    /// Longest wait to connect, for an answer, and between two pieces of a download.
    pub timeout: Duration,
    /// Longest the whole fetch may take.
    pub deadline: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{0}")]
    Usage(String),
    #[error("{url}: {what}")]
    Registry { url: String, what: String },
    #[error("{what} {digest}: its content's digest is {actual}; refusing it")]
    Digest {
        what: String,
        digest: String,
        actual: String,
    },
    #[error("{0}")]
    Image(String),
    #[error(transparent)]
    Layer(#[from] LayerError),
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl FetchError {
    fn registry(url: &impl std::fmt::Display, what: impl Into<String>) -> Self {
        FetchError::Registry {
            url: url.to_string(),
            what: what.into(),
        }
    }
}

/// `REGISTRY/REPOSITORY[:TAG|@DIGEST]`.
#[derive(Debug, Clone)]
pub struct ImageRef {
    /// `host[:port]`.
    pub registry: String,
    pub repository: String,
    /// A tag, or a `sha256:` digest.
    pub reference: String,
}

impl ImageRef {
    pub fn parse(text: &str) -> Result<ImageRef, FetchError> {
        let bad = |why: &str| {
            FetchError::Usage(format!(
                "--image {text:?}: {why} (expected REGISTRY/REPOSITORY[:TAG|@DIGEST], e.g. \
                 {DEFAULT_REPOSITORY}:v0.57.1)"
            ))
        };
        let (name, reference) = match text.split_once('@') {
            Some((name, digest)) => {
                check_digest(digest).map_err(|_| bad("not a sha256 digest after @"))?;
                (name, digest.to_string())
            }
            None => match text.rfind(':') {
                Some(i) if i > text.rfind('/').unwrap_or(0) => (&text[..i], text[i + 1..].into()),
                _ => (text, "latest".to_string()),
            },
        };
        let (registry, repository) = name.split_once('/').ok_or_else(|| bad("no registry"))?;
        if !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
            return Err(bad("name the registry first"));
        }
        registry
            .parse::<http::uri::Authority>()
            .map_err(|_| bad("the registry is not HOST[:PORT]"))?;
        let repo_ok = !repository.is_empty()
            && repository
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/".contains(&b));
        if !repo_ok {
            return Err(bad(
                "the repository has characters a registry does not allow",
            ));
        }
        let ref_ok = !reference.is_empty()
            && reference
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b));
        if !ref_ok {
            return Err(bad("the tag has characters a registry does not allow"));
        }
        Ok(ImageRef {
            registry: registry.to_string(),
            repository: repository.to_string(),
            reference,
        })
    }

    /// The tag, unless the reference is a digest.
    pub fn tag(&self) -> Option<&str> {
        (!self.reference.starts_with("sha256:")).then_some(self.reference.as_str())
    }
}

impl std::fmt::Display for ImageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sep = if self.tag().is_some() { ':' } else { '@' };
        write!(
            f,
            "{}/{}{sep}{}",
            self.registry, self.repository, self.reference
        )
    }
}

/// What was fetched.
#[derive(Debug)]
pub struct Fetched {
    /// The digest of the image's manifest (this platform's).
    pub digest: String,
    pub layers: usize,
    pub files: u64,
    pub bytes: u64,
}

/// Fetches `image`'s console into `dest`, replacing what is there only once the whole
/// console is unpacked; on any failure nothing at `dest` changes.
pub async fn fetch(
    image: &ImageRef,
    dest: &Path,
    limits: FetchLimits,
) -> Result<Fetched, FetchError> {
    // A registry that trickles bytes never trips the per-wait timeout: the whole fetch is
    // bounded too (its temporary directory goes with the dropped future).
    tokio::time::timeout(limits.deadline, fetch_within(image, dest, limits))
        .await
        .map_err(|_| {
            FetchError::Image(format!(
                "{image}: the fetch took longer than {:?}; giving up",
                limits.deadline
            ))
        })?
}

async fn fetch_within(
    image: &ImageRef,
    dest: &Path,
    limits: FetchLimits,
) -> Result<Fetched, FetchError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FetchError::Io { path, source }
    };
    // Only a console (or nothing) is replaced: never a directory of something else named
    // by mistake.
    if let Ok(mut entries) = std::fs::read_dir(dest)
        && entries.next().is_some()
        && !dest.join("index.html").is_file()
    {
        return Err(FetchError::Usage(format!(
            "{} holds files but no index.html: not a console to replace; give a new or \
             empty directory",
            dest.display()
        )));
    }
    if dest.exists() && !dest.is_dir() {
        return Err(FetchError::Usage(format!(
            "{} is not a directory",
            dest.display()
        )));
    }
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    // Beside the destination, so that the rename stays on one filesystem; removed on drop.
    let staging = tempfile::Builder::new()
        .prefix(".console-fetch-")
        .tempdir_in(&parent)
        .map_err(io(&parent))?;
    let root = staging.path().join("console");
    std::fs::create_dir(&root).map_err(io(&root))?;

    let mut registry = Registry::new(image.clone(), limits)?;
    let (digest, manifest) = registry.image_manifest().await?;
    let layers = manifest.layers.unwrap_or_default();
    if layers.is_empty() {
        return Err(FetchError::Image(format!(
            "{image}: the image has no layers"
        )));
    }
    let mut unpacker = Unpacker::new(root.clone(), limits.unpack);
    for (i, layer) in layers.iter().enumerate() {
        let compression = compression(&layer.media_type).ok_or_else(|| {
            FetchError::Image(format!(
                "{image}: layer {} has media type {:?}, which is not a tar layer (gzip or plain)",
                layer.digest, layer.media_type
            ))
        })?;
        let blob = staging.path().join(format!("layer-{i}"));
        registry.blob(layer, &blob).await?;
        let name = layer.digest.clone();
        let path = blob.clone();
        unpacker = tokio::task::spawn_blocking(move || -> Result<Unpacker, FetchError> {
            let file = std::fs::File::open(&path).map_err(io(&path))?;
            let reader = std::io::BufReader::new(file);
            match compression {
                Compression::Gzip => unpacker.apply(flate2::read::GzDecoder::new(reader), &name)?,
                Compression::None => unpacker.apply(reader, &name)?,
            }
            Ok(unpacker)
        })
        .await
        .map_err(|e| FetchError::Image(format!("unpacking a layer stopped: {e}")))??;
        std::fs::remove_file(&blob).map_err(io(&blob))?;
    }
    if !root.join("index.html").is_file() {
        return Err(FetchError::Image(format!(
            "{image}: no web/static/index.html in the image (not a PipeCD control plane image?)"
        )));
    }
    let (files, bytes) = unpacker.written();
    // Into place: the old console (if any) moves aside first, and comes back if the new
    // one cannot go in.
    let old = staging.path().join("old");
    let had_old = dest.exists();
    if had_old {
        std::fs::rename(dest, &old).map_err(io(dest))?;
    }
    if let Err(source) = std::fs::rename(&root, dest) {
        if had_old {
            let _ = std::fs::rename(&old, dest);
        }
        return Err(FetchError::Io {
            path: dest.to_path_buf(),
            source,
        });
    }
    Ok(Fetched {
        digest,
        layers: layers.len(),
        files,
        bytes,
    })
}

#[derive(Debug, Clone, Copy)]
enum Compression {
    Gzip,
    None,
}

fn compression(media_type: &str) -> Option<Compression> {
    match media_type {
        "application/vnd.oci.image.layer.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.diff.tar.gzip" => Some(Compression::Gzip),
        "application/vnd.oci.image.layer.v1.tar"
        | "application/vnd.docker.image.rootfs.diff.tar" => Some(Compression::None),
        _ => None,
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    #[serde(default)]
    media_type: Option<String>,
    /// An index (manifest list): one manifest per platform.
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    /// An image manifest.
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Debug, Deserialize)]
struct Platform {
    architecture: String,
    os: String,
}

/// This machine's architecture as OCI names it.
fn oci_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

fn check_digest(digest: &str) -> Result<(), ()> {
    match digest.strip_prefix("sha256:") {
        Some(hex)
            if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
        {
            Ok(())
        }
        _ => Err(()),
    }
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether a token realm on `realm` may serve the registry on `registry`: the same host,
/// or (for names) the same site, as `auth.docker.io` serves `registry-1.docker.io`.
fn same_site(registry: &str, realm: &str) -> bool {
    let (registry, realm) = (registry.to_ascii_lowercase(), realm.to_ascii_lowercase());
    if registry == realm {
        return true;
    }
    let is_ip = |h: &str| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok()
    };
    if is_ip(&registry) || is_ip(&realm) || registry == "localhost" || realm == "localhost" {
        return false;
    }
    fn site(h: &str) -> Vec<&str> {
        h.rsplit('.').take(2).collect()
    }
    let a = site(&registry);
    a.len() == 2 && a == site(&realm)
}

struct Registry {
    image: ImageRef,
    https: bool,
    tls: Arc<rustls::ClientConfig>,
    token: Option<String>,
    limits: FetchLimits,
}

impl Registry {
    fn new(image: ImageRef, limits: FetchLimits) -> Result<Registry, FetchError> {
        let host = image
            .registry
            .parse::<http::uri::Authority>()
            .map(|a| a.host().to_string())
            .unwrap_or_default();
        // Like `docker pull`, a registry on loopback is reached over plain
        // HTTP (the tests' registry); every other one over HTTPS.
        let https = !is_loopback(&host);
        let mut roots = rustls::RootCertStore::empty();
        let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| FetchError::Image(format!("TLS set-up: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Registry {
            image,
            https,
            tls: Arc::new(tls),
            token: None,
            limits,
        })
    }

    fn url(&self, path: &str) -> Result<Uri, FetchError> {
        let scheme = if self.https { "https" } else { "http" };
        let text = format!("{scheme}://{}{path}", self.image.registry);
        text.parse()
            .map_err(|_| FetchError::Usage(format!("{text}: not a URL")))
    }

    /// The image manifest for this platform (through the index when there is one) and its
    /// digest.
    async fn image_manifest(&mut self) -> Result<(String, Manifest), FetchError> {
        let reference = self.image.reference.clone();
        let (digest, top) = self.manifest(&reference).await?;
        let Some(manifests) = top.manifests else {
            return Ok((digest, top));
        };
        let arch = oci_arch();
        let linux = |d: &&Descriptor| d.platform.as_ref().is_some_and(|p| p.os == "linux");
        // The console is the same on every platform; this machine's is preferred.
        let chosen = manifests
            .iter()
            .filter(linux)
            .find(|d| d.platform.as_ref().is_some_and(|p| p.architecture == arch))
            .or_else(|| manifests.iter().find(linux))
            .ok_or_else(|| {
                FetchError::Image(format!(
                    "{}: the image index has no linux image",
                    self.image
                ))
            })?;
        if chosen.size > self.limits.max_manifest_bytes {
            return Err(FetchError::Image(format!(
                "{}: its manifest is {} bytes, more than {}",
                self.image, chosen.size, self.limits.max_manifest_bytes
            )));
        }
        let (digest, manifest) = self.manifest(&chosen.digest.clone()).await?;
        if manifest.manifests.is_some() || manifest.layers.is_none() {
            return Err(FetchError::Image(format!(
                "{}: {} is not an image manifest ({:?})",
                self.image, chosen.digest, manifest.media_type
            )));
        }
        Ok((digest, manifest))
    }

    /// One manifest by tag or digest, its digest checked: against the digest asked for,
    /// or the one the registry names (`Docker-Content-Digest`) for a tag.
    async fn manifest(&mut self, reference: &str) -> Result<(String, Manifest), FetchError> {
        let path = format!("/v2/{}/manifests/{reference}", self.image.repository);
        let (url, response) = self.get(&path, ACCEPT_MANIFESTS).await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Err(FetchError::Image(format!(
                "{}/{}:{reference}: the registry has no such image",
                self.image.registry, self.image.repository
            )));
        }
        let named = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = self
            .read_all(
                &url,
                response,
                self.limits.max_manifest_bytes,
                "the manifest",
            )
            .await?;
        let actual = sha256(&body);
        let expected = if reference.starts_with("sha256:") {
            Some(reference.to_string())
        } else {
            named
        };
        if let Some(expected) = expected
            && expected != actual
        {
            return Err(FetchError::Digest {
                what: format!("{}: the manifest", self.image),
                digest: expected,
                actual,
            });
        }
        let manifest = serde_json::from_slice(&body).map_err(|e| {
            FetchError::registry(&url, format!("the manifest is not an OCI manifest: {e}"))
        })?;
        Ok((actual, manifest))
    }

    /// Downloads a layer to `path`, its size and digest checked.
    async fn blob(&mut self, layer: &Descriptor, path: &Path) -> Result<(), FetchError> {
        check_digest(&layer.digest).map_err(|_| {
            FetchError::Image(format!(
                "{}: layer digest {:?} is not a sha256 digest",
                self.image, layer.digest
            ))
        })?;
        if layer.size > self.limits.max_layer_bytes {
            return Err(FetchError::Image(format!(
                "{}: layer {} is {} bytes, more than the {} a layer may have",
                self.image, layer.digest, layer.size, self.limits.max_layer_bytes
            )));
        }
        let blob_path = format!("/v2/{}/blobs/{}", self.image.repository, layer.digest);
        let (url, response) = self.get(&blob_path, "*/*").await?;
        if !response.status().is_success() {
            return Err(FetchError::registry(
                &url,
                format!("answered {} for layer {}", response.status(), layer.digest),
            ));
        }
        let io = |source| FetchError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = tokio::fs::File::create(path).await.map_err(io)?;
        let mut hasher = Sha256::new();
        let mut body = response.into_body();
        let mut total = 0u64;
        while let Some(chunk) = self.next_chunk(&url, &mut body).await? {
            total += chunk.len() as u64;
            if total > layer.size {
                return Err(FetchError::registry(
                    &url,
                    format!(
                        "layer {} is longer than the {} bytes its manifest says",
                        layer.digest, layer.size
                    ),
                ));
            }
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(io)?;
        }
        file.flush().await.map_err(io)?;
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if actual != layer.digest {
            return Err(FetchError::Digest {
                what: format!("{}: layer", self.image),
                digest: layer.digest.clone(),
                actual,
            });
        }
        Ok(())
    }

    /// The next piece of a body, waiting at most the timeout for it.
    async fn next_chunk(
        &self,
        url: &Uri,
        body: &mut Incoming,
    ) -> Result<Option<Bytes>, FetchError> {
        let timeout = self.limits.timeout;
        loop {
            let frame = tokio::time::timeout(timeout, body.frame())
                .await
                .map_err(|_| {
                    FetchError::registry(url, format!("sent nothing for {timeout:?}; giving up"))
                })?;
            match frame {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(FetchError::registry(
                        url,
                        format!("the download broke: {e}"),
                    ));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// A whole (small) answer, which must be a success and at most `max` bytes.
    async fn read_all(
        &self,
        url: &Uri,
        response: http::Response<Incoming>,
        max: u64,
        what: &str,
    ) -> Result<Vec<u8>, FetchError> {
        let status = response.status();
        let mut body = response.into_body();
        let mut out = Vec::new();
        while let Some(chunk) = self.next_chunk(url, &mut body).await? {
            if (out.len() + chunk.len()) as u64 > max {
                return Err(FetchError::registry(
                    url,
                    format!("{what} is more than {max} bytes"),
                ));
            }
            out.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&out[..out.len().min(300)]).into_owned();
            return Err(FetchError::registry(
                url,
                format!("answered {status} for {what}: {}", text.trim()),
            ));
        }
        Ok(out)
    }

    /// GET on the registry, through redirects and (once) the token flow; the final URL
    /// and answer.
    async fn get(
        &mut self,
        path: &str,
        accept: &str,
    ) -> Result<(Uri, http::Response<Incoming>), FetchError> {
        let home = self.url(path)?;
        let mut url = home.clone();
        let mut redirects = 0;
        let mut authenticated = false;
        loop {
            let on_registry = url.authority() == home.authority();
            // The token is the registry's: never sent to a CDN it redirects to.
            let token = self.token.as_deref().filter(|_| on_registry);
            let response = self.send(&url, accept, token).await?;
            let status = response.status();
            if status.is_redirection() {
                redirects += 1;
                if redirects > MAX_REDIRECTS {
                    return Err(FetchError::registry(&home, "too many redirects"));
                }
                let location = response
                    .headers()
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| {
                        FetchError::registry(&url, format!("{status} without a Location"))
                    })?;
                url = self.follow(&url, location)?;
                continue;
            }
            if status == StatusCode::UNAUTHORIZED && on_registry && !authenticated {
                let challenge = response
                    .headers()
                    .get(header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
                    .ok_or_else(|| {
                        FetchError::registry(
                            &url,
                            "answered 401 without a WWW-Authenticate challenge",
                        )
                    })?;
                self.token = Some(self.token_for(&url, &challenge).await?);
                authenticated = true;
                continue;
            }
            if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
                return Err(FetchError::registry(
                    &url,
                    format!("answered {status}: the image is not public (anonymous pulls only)"),
                ));
            }
            return Ok((url, response));
        }
    }

    /// Where a redirect from `from` to `location` goes: https only (plain http only on
    /// loopback).
    fn follow(&self, from: &Uri, location: &str) -> Result<Uri, FetchError> {
        let next: Uri = if location.starts_with('/') {
            let scheme = from.scheme_str().unwrap_or("https");
            let authority = from.authority().map(|a| a.as_str()).unwrap_or_default();
            format!("{scheme}://{authority}{location}").parse()
        } else {
            location.parse()
        }
        .map_err(|_| FetchError::registry(from, format!("redirects to {location:?}, not a URL")))?;
        let host = next.host().unwrap_or_default();
        match next.scheme_str() {
            Some("https") => Ok(next),
            Some("http") if is_loopback(host) && !self.https => Ok(next),
            _ => Err(FetchError::registry(
                from,
                format!("redirects to {location:?}; only https is followed"),
            )),
        }
    }

    /// The anonymous bearer-token flow: the realm the challenge names (which must be the
    /// registry's own site) gives a pull token for the repository.
    async fn token_for(&self, url: &Uri, challenge: &str) -> Result<String, FetchError> {
        let params = challenge
            .strip_prefix("Bearer ")
            .or_else(|| challenge.strip_prefix("bearer "))
            .ok_or_else(|| {
                FetchError::registry(
                    url,
                    format!("asks for {challenge:?}; only anonymous bearer tokens are supported"),
                )
            })?;
        let params = parse_challenge(params);
        let get = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        };
        let realm = get("realm")
            .ok_or_else(|| FetchError::registry(url, "a bearer challenge without a realm"))?;
        let realm_uri: Uri = realm.parse().map_err(|_| {
            FetchError::registry(url, format!("token realm {realm:?} is not a URL"))
        })?;
        let realm_host = realm_uri.host().unwrap_or_default().to_string();
        let registry_host = url.host().unwrap_or_default();
        if !same_site(registry_host, &realm_host) {
            return Err(FetchError::registry(
                url,
                format!(
                    "sends for a token to {realm_host}, another host than the registry's \
                     ({registry_host}); refusing"
                ),
            ));
        }
        let scheme_ok = match realm_uri.scheme_str() {
            Some("https") => true,
            Some("http") => !self.https && is_loopback(&realm_host),
            _ => false,
        };
        if !scheme_ok {
            return Err(FetchError::registry(
                url,
                format!("token realm {realm:?} is not https"),
            ));
        }
        let scope =
            get("scope").unwrap_or_else(|| format!("repository:{}:pull", self.image.repository));
        let mut query = form_urlencoded::Serializer::new(String::new());
        if let Some(service) = get("service") {
            query.append_pair("service", &service);
        }
        query.append_pair("scope", &scope);
        let sep = if realm.contains('?') { '&' } else { '?' };
        let token_url: Uri = format!("{realm}{sep}{}", query.finish())
            .parse()
            .map_err(|_| {
                FetchError::registry(url, format!("token realm {realm:?} is not a URL"))
            })?;
        let response = self.send(&token_url, "application/json", None).await?;
        let body = self
            .read_all(&token_url, response, MAX_TOKEN_BYTES, "the token")
            .await?;
        #[derive(Deserialize)]
        struct TokenAnswer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let answer: TokenAnswer = serde_json::from_slice(&body)
            .map_err(|e| FetchError::registry(&token_url, format!("not a token answer: {e}")))?;
        answer
            .token
            .or(answer.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| FetchError::registry(&token_url, "the answer holds no token"))
    }

    /// One request on its own connection; the answer's head within the timeout.
    async fn send(
        &self,
        url: &Uri,
        accept: &str,
        token: Option<&str>,
    ) -> Result<http::Response<Incoming>, FetchError> {
        let timeout = self.limits.timeout;
        let https = url.scheme_str() == Some("https");
        let host = url
            .host()
            .ok_or_else(|| FetchError::registry(url, "no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
        let late = |what: &str| FetchError::registry(url, format!("{what} within {timeout:?}"));
        let tcp = tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port)))
            .await
            .map_err(|_| late("no connection"))?
            .map_err(|e| FetchError::registry(url, format!("cannot connect: {e}")))?;
        let io: Box<dyn Io> = if https {
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|e| FetchError::registry(url, format!("not a server name: {e}")))?;
            let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
            let tls = tokio::time::timeout(timeout, connector.connect(name, tcp))
                .await
                .map_err(|_| late("no TLS handshake"))?
                .map_err(|e| FetchError::registry(url, format!("TLS: {e}")))?;
            Box::new(tls)
        } else {
            Box::new(tcp)
        };
        let (mut sender, connection) = tokio::time::timeout(
            timeout,
            hyper::client::conn::http1::handshake(TokioIo::new(io)),
        )
        .await
        .map_err(|_| late("no HTTP connection"))?
        .map_err(|e| FetchError::registry(url, format!("HTTP: {e}")))?;
        tokio::spawn(connection);
        let authority = url.authority().map(|a| a.as_str()).unwrap_or_default();
        let path = url.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let mut request = http::Request::get(path)
            .header(header::HOST, authority)
            .header(header::ACCEPT, accept)
            .header(
                header::USER_AGENT,
                concat!("wisp/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Empty::<Bytes>::new())
            .map_err(|e| FetchError::registry(url, format!("request: {e}")))?;
        tokio::time::timeout(timeout, sender.send_request(request))
            .await
            .map_err(|_| late("no answer"))?
            .map_err(|e| FetchError::registry(url, format!("no answer: {e}")))
    }
}

/// `realm="...",service="...",scope="..."` as pairs (values may hold commas inside quotes).
fn parse_challenge(params: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = params.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key.trim().trim_start_matches(',').trim().to_string();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (quoted[..end].to_string(), &quoted[end + 1..]),
                None => (quoted.to_string(), ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (after[..end].trim().to_string(), &after[end..]),
                None => (after.trim().to_string(), ""),
            }
        };
        out.push((key, value));
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse() {
        let r = ImageRef::parse("ghcr.io/pipe-cd/controlplane:v0.57.1").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag()),
            ("ghcr.io", "pipe-cd/controlplane", Some("v0.57.1"))
        );
        let r = ImageRef::parse("127.0.0.1:5000/a/b").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.reference.as_str()),
            ("127.0.0.1:5000", "latest")
        );
        let d = format!("localhost:5000/x@sha256:{}", "a".repeat(64));
        assert_eq!(ImageRef::parse(&d).unwrap().tag(), None);
        assert!(ImageRef::parse("pipe-cd/controlplane:v1").is_err());
        assert!(ImageRef::parse("ghcr.io/x@sha256:zz").is_err());
        assert!(ImageRef::parse("ghcr.io/x:../../y").is_err());
    }

    #[test]
    fn challenges_parse_and_realms_must_be_the_registrys_site() {
        let p = parse_challenge(
            r#"realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(p[0], ("realm".into(), "https://ghcr.io/token".into()));
        assert_eq!(p[2], ("scope".into(), "repository:a/b:pull,push".into()));
        assert!(same_site("ghcr.io", "ghcr.io"));
        assert!(same_site("registry-1.docker.io", "auth.docker.io"));
        assert!(!same_site("ghcr.io", "evil.example"));
        assert!(!same_site("127.0.0.1", "localhost"));
        assert!(!same_site("127.0.0.1", "127.0.0.2"));
    }
}
