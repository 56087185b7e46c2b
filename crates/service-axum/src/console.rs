//! The web console (SPEC "Console (web UI)"): the static app in the repository's
//! `console/` directory, embedded into the binary and served same-origin.
//!
//! The app is plain ES modules with no build step, so its files keep their names.
//! Cache busting comes from the path instead: every file but `index.html` is served
//! under `{mount}/{hash}/`, where `hash` covers the content of every file, and is
//! cached as immutable; the index (no-cache) names the current hash. Only the exact
//! files are routes, so any other path under the mount falls through to the API's
//! 404, never to the index page. The routes carry no authentication: the app's data
//! requests go through the API like any client's.
//!
//! ```no_run
//! # fn demo(engine: service_engine::Engine) {
//! let app = service_axum::console("/console").merge(service_axum::router(engine));
//! # }
//! ```

use std::io::Write;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use include_dir::{Dir, DirEntry, include_dir};
use sha2::{Digest, Sha256};

static FILES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../console");

/// Where `index.html` names the hashed asset folder.
const ASSETS_MARK: &str = "%ASSETS%";
/// Smaller files are sent as they are: gzip would save less than a packet.
const GZIP_FROM_BYTES: usize = 1024;
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// The index may load scripts and styles from its own origin only; `connect-src *`
/// because `?baseUrl=` may point the app at another server.
const INDEX_POLICY: &str = "default-src 'self'; connect-src *; img-src 'self' data:; \
     style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// A mount path the console cannot take: `/`, one without a leading `/`, or one
/// that would shadow an API route.
#[derive(Debug, thiserror::Error)]
#[error("console mount path {0:?} {1}")]
pub struct ConsoleMountError(String, &'static str);

/// The console's routes at `mount` (such as `/console`), to merge beside the API
/// router: the bare mount redirects to `{mount}/`, which serves the app. GET and HEAD
/// only.
///
/// # Panics
///
/// When `mount` is not a valid mount path; check it first with [`console_mount`].
pub fn console(mount: &str) -> Router {
    let mount = console_mount(mount).unwrap_or_else(|error| panic!("{error}"));
    let files = files();
    let hash = hash_of(&files);
    let slashed = format!("{mount}/");
    let mut router = Router::new().route(
        &mount,
        get(move |request: Request| async move { redirect(&slashed, &request) }),
    );
    for (path, contents) in files {
        if path == "index.html" {
            let Ok(text) = std::str::from_utf8(contents) else {
                continue;
            };
            let asset = Asset::new(
                "index.html",
                Bytes::from(text.replace(ASSETS_MARK, &hash)),
                "no-cache",
            );
            router = router.route(
                &format!("{mount}/"),
                get(move |headers| asset.serve(headers)),
            );
        } else {
            let asset = Asset::new(path, Bytes::from_static(contents), IMMUTABLE);
            router = router.route(
                &format!("{mount}/{hash}/{path}"),
                get(move |headers| asset.serve(headers)),
            );
        }
    }
    router
}

/// `mount` as the console's mount path, without a trailing slash, or why it cannot be
/// one.
pub fn console_mount(mount: &str) -> Result<String, ConsoleMountError> {
    let trimmed = mount.trim_end_matches('/');
    if !mount.starts_with('/') {
        return Err(ConsoleMountError(mount.into(), "must start with /"));
    }
    if trimmed.is_empty() {
        return Err(ConsoleMountError(mount.into(), "must not be /"));
    }
    if trimmed.contains(['{', '}', '*', '?', '#']) || trimmed.contains("//") {
        return Err(ConsoleMountError(
            mount.into(),
            "must be a plain path (no {, }, *, ?, # or empty segment)",
        ));
    }
    let first = trimmed.split('/').nth(1).unwrap_or_default();
    let shadows = crate::routes(&crate::RouterOptions::default())
        .iter()
        .any(|route| route.path.split('/').nth(1) == Some(first));
    if shadows {
        return Err(ConsoleMountError(
            mount.into(),
            "shares its first segment with an API route",
        ));
    }
    Ok(trimmed.into())
}

/// Every embedded file by its path under `console/`, sorted.
fn files() -> Vec<(&'static str, &'static [u8])> {
    fn walk(dir: &'static Dir<'static>, out: &mut Vec<(&'static str, &'static [u8])>) {
        for entry in dir.entries() {
            match entry {
                DirEntry::Dir(dir) => walk(dir, out),
                DirEntry::File(file) => {
                    if let Some(path) = file.path().to_str() {
                        out.push((path, file.contents()));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&FILES, &mut out);
    out.sort_unstable();
    out
}

/// Twelve hex digits of a digest over every file's path and contents.
fn hash_of(files: &[(&str, &[u8])]) -> String {
    let mut digest = Sha256::new();
    for (path, contents) in files {
        digest.update((path.len() as u64).to_le_bytes());
        digest.update(path.as_bytes());
        digest.update((contents.len() as u64).to_le_bytes());
        digest.update(contents);
    }
    digest.finalize()[..6]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The bare mount answers 302 to the slashed form, keeping the query (`?baseUrl=`).
fn redirect(slashed: &str, request: &Request) -> Response {
    let location = match request.uri().query() {
        Some(query) => format!("{slashed}?{query}"),
        None => slashed.to_owned(),
    };
    match HeaderValue::try_from(location) {
        Ok(location) => (StatusCode::FOUND, [(header::LOCATION, location)]).into_response(),
        Err(_) => StatusCode::BAD_REQUEST.into_response(),
    }
}

/// One file, ready to send: its type, caching and, where it pays, a gzip copy made
/// once when the router is built.
#[derive(Clone)]
struct Asset {
    body: Bytes,
    gzip: Option<Bytes>,
    content_type: &'static str,
    cache: &'static str,
    policy: Option<&'static str>,
}

impl Asset {
    fn new(path: &str, body: Bytes, cache: &'static str) -> Self {
        let gzip = (body.len() >= GZIP_FROM_BYTES)
            .then(|| gzip(&body))
            .flatten()
            // Worth a Content-Encoding only when it saves a tenth or more.
            .filter(|packed| packed.len() * 10 <= body.len() * 9);
        Self {
            gzip,
            content_type: content_type(path),
            cache,
            policy: (path == "index.html").then_some(INDEX_POLICY),
            body,
        }
    }

    async fn serve(self, headers: HeaderMap) -> Response {
        let accepts_gzip = headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|coding| {
                let mut parts = coding.split(';');
                // `gzip;q=0` (or `q=0.0`) refuses it.
                let refused = |param: &str| {
                    param
                        .trim()
                        .strip_prefix("q=")
                        .and_then(|q| q.trim().parse::<f32>().ok())
                        == Some(0.0)
                };
                parts.next().map(str::trim) == Some("gzip") && !parts.any(refused)
            });
        let mut response = match (&self.gzip, accepts_gzip) {
            (Some(packed), true) => {
                let mut response = packed.clone().into_response();
                response
                    .headers_mut()
                    .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                response
            }
            _ => self.body.into_response(),
        };
        let out = response.headers_mut();
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        out.insert(header::CACHE_CONTROL, HeaderValue::from_static(self.cache));
        out.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        if self.gzip.is_some() {
            out.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        }
        if let Some(policy) = self.policy {
            out.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(policy),
            );
        }
        response
    }
}

fn gzip(body: &[u8]) -> Option<Bytes> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(body).ok()?;
    encoder.finish().ok().map(Bytes::from)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_paths_are_checked() {
        assert_eq!(console_mount("/console/").unwrap(), "/console");
        assert_eq!(console_mount("/admin/ui").unwrap(), "/admin/ui");
        for bad in ["/", "console", "/threads", "/store/ui", "/a//b", "/{x}"] {
            assert!(console_mount(bad).is_err(), "{bad}");
        }
    }
}
