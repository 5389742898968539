//! `memlens serve`: the viewer with snapshots already open, for a remote GPU node reached
//! through an SSH port forward (`ssh -L 8080:127.0.0.1:8080 node`). A tiny HTTP/1.1 server on
//! std::net that listens on 127.0.0.1 unless told otherwise (`--allow-remote`), answers GET and
//! HEAD only (a single `Range` honoured), reads at most `MAX_HEAD_BYTES` of a request within
//! `HEAD_DEADLINE` (so idle or slow connections let go of their thread), answers a malformed or
//! oversized request 400, refuses Host names that are not loopback (DNS rebinding), and serves
//! exactly two kinds of path from a fixed table: the embedded single-file viewer at `/`, and each
//! file named on the command line at `/files/<n>/<name>`. Paths are compared as sent, never
//! decoded or joined to a folder, so no encoding of `..` can escape (tests/html_serve.rs).
//! Every answer is `Cache-Control: no-store`: the page names this run's files and carries its
//! wasm inside (no separate, content-hashed file a browser could keep: docs/BENCHMARKS.md, "Cold
//! open"), and a snapshot may change under its name.

use crate::html::{page_with, viewer, viewer_csp, Preload};
use crate::load::CliError;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most a request line plus headers may take.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The longest a client may take to send its request line and headers.
const HEAD_DEADLINE: Duration = Duration::from_secs(10);
/// Connections handled at once (a thread each, mostly waiting); more are closed unanswered.
const MAX_CONNECTIONS: usize = 512;
/// Stack of a connection's thread: it parses one head and copies a file.
const THREAD_STACK_BYTES: usize = 256 * 1024;

#[derive(clap::Args)]
pub struct Args {
    /// Snapshots to open in the viewer (served from disk as they are; nothing else is served).
    files: Vec<String>,
    /// Port to listen on (0: any free port; the URL is printed).
    #[arg(short, long, default_value_t = 8080)]
    port: u16,
    /// Address to listen on. Loopback only (127.0.0.1, ::1, localhost) unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Allow a non-loopback --bind: anyone who can reach that address can read the snapshots.
    #[arg(long)]
    allow_remote: bool,
}

struct Site {
    page: String,
    csp: String,
    /// (URL path, file path) of each served file.
    files: Vec<(String, String)>,
    allow_remote: bool,
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn url_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn parse_bind(bind: &str) -> Result<IpAddr, CliError> {
    if bind.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    bind.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| CliError(format!("--bind wants an IP address: {bind}")))
}

pub fn run(a: Args) -> Result<(), CliError> {
    let ip = parse_bind(&a.bind)?;
    if !ip.is_loopback() && !a.allow_remote {
        return Err(CliError(format!(
            "refusing to listen on {ip}: anyone who can reach it could read the snapshots; keep the default 127.0.0.1 and forward the port over SSH (ssh -L {p}:127.0.0.1:{p} <node>), or pass --allow-remote",
            p = a.port
        )));
    }
    let viewer = viewer()?;
    let mut files = Vec::new();
    let mut preload = Vec::new();
    for (i, f) in a.files.iter().enumerate() {
        let meta =
            std::fs::metadata(f).map_err(|e| CliError(format!("cannot read file: {e}: {f}")))?;
        if !meta.is_file() {
            return Err(CliError(format!("not a file: {f}")));
        }
        let name = Path::new(f)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| format!("file{i}"));
        let url = format!("files/{i}/{}", url_encode(&name));
        files.push((format!("/{url}"), f.clone()));
        preload.push(Preload::Url { name, url });
    }
    // The single file may fetch nothing; served, it fetches the files above from its origin.
    let page =
        page_with(viewer, &preload, None)?.replacen("connect-src 'none'", "connect-src 'self'", 1);
    let csp = match viewer_csp(&page) {
        Some(c) if c.contains("connect-src 'self'") => format!("{c}; frame-ancestors 'none'"),
        _ => {
            return Err(CliError(
                "the embedded viewer has no connect-src 'none' to relax: rebuild it with `bash scripts/serve.sh --build`, then `cargo build --release -p memlens-cli`".into(),
            ))
        }
    };
    let site = Arc::new(Site {
        page,
        csp,
        files,
        allow_remote: a.allow_remote,
    });
    let addr = SocketAddr::new(ip, a.port);
    let listener =
        TcpListener::bind(addr).map_err(|e| CliError(format!("cannot listen: {e}: {addr}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError(format!("cannot listen: {e}: {addr}")))?;
    let shown = match local.ip() {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    };
    // Written without println!: a closed stdout (`memlens serve … | head -1`) must not stop
    // the server.
    let mut hello = format!(
        "memlens: serving the viewer with {} file(s) at http://{shown}:{}/ (Ctrl-C to stop)\n",
        site.files.len(),
        local.port()
    );
    if ip.is_loopback() {
        hello.push_str(&format!(
            "memlens: from your machine: ssh -L {p}:127.0.0.1:{p} <this node>, then open http://127.0.0.1:{p}/\n",
            p = local.port()
        ));
    }
    let mut so = io::stdout().lock();
    let _ = so.write_all(hello.as_bytes()).and_then(|()| so.flush());
    drop(so);
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let (site, mine) = (site.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("memlens-serve".into())
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || {
                if let Err(e) = handle(&site, stream) {
                    if !matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::UnexpectedEof
                            | io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                    ) {
                        eprintln!("memlens: serve: {e}");
                    }
                }
                mine.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
    Ok(())
}

/// Reads the request head (up to the blank line) within [`HEAD_DEADLINE`]; `None` when it is
/// longer than allowed.
fn read_head(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let deadline = Instant::now() + HEAD_DEADLINE;
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request head too slow",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed mid-request",
            ));
        }
        head.extend_from_slice(buf.get(..n).unwrap_or_default());
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end);
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD_BYTES {
            return Ok(None);
        }
    }
}

/// Whether a `Host` header names this machine (any port): 127.0.0.0/8, ::1 or localhost.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

struct Reply<'a> {
    status: &'a str,
    content_type: &'a str,
    length: u64,
    extra: Vec<(&'a str, &'a str)>,
}

fn write_head(w: &mut impl Write, r: &Reply<'_>) -> io::Result<()> {
    write!(
        w,
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n",
        r.status, r.content_type, r.length
    )?;
    for (k, v) in &r.extra {
        write!(w, "{k}: {v}\r\n")?;
    }
    w.write_all(b"\r\n")
}

fn plain(w: &mut impl Write, status: &str, body: &str, extra: Vec<(&str, &str)>) -> io::Result<()> {
    write_head(
        w,
        &Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            length: body.len() as u64,
            extra,
        },
    )?;
    w.write_all(body.as_bytes())?;
    w.flush()
}

fn handle(site: &Site, mut stream: TcpStream) -> io::Result<()> {
    stream.set_write_timeout(Some(Duration::from_secs(120)))?;
    let r = respond(site, &mut stream);
    // Close gently: stop sending, then read what the client still sends (the rest of an
    // oversized request, a POST body) for a moment, so closing does not reset the connection
    // and destroy the answer before the client reads it.
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = io::copy(&mut (&stream).take(1 << 20), &mut io::sink());
    r
}

/// A request the server answers: GET or HEAD of a path, with its headers.
struct Request<'a> {
    head_only: bool,
    path: &'a str,
    headers: Vec<(&'a str, &'a str)>,
}

impl Request<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

/// Why a request is not served: its status line, body and extra headers.
type Refusal = (
    &'static str,
    &'static str,
    Vec<(&'static str, &'static str)>,
);

const BAD_REQUEST: &str = "400 Bad Request";

/// Parses a request head: a request line of three parts (an origin-form target, `HTTP/1.x`),
/// then `name: value` lines of visible ASCII.
fn parse(head: &[u8]) -> Result<Request<'_>, Refusal> {
    let bad = || (BAD_REQUEST, "bad request\n", vec![]);
    let text = std::str::from_utf8(head).map_err(|_| bad())?;
    if text
        .bytes()
        .any(|b| b.is_ascii_control() && b != b'\r' && b != b'\n' && b != b'\t')
    {
        return Err(bad());
    }
    let mut lines = text.split("\r\n");
    let mut parts = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") || !target.starts_with('/') {
        return Err(bad());
    }
    let mut headers = Vec::new();
    for l in lines {
        let (k, v) = l.split_once(':').ok_or_else(bad)?;
        if k.is_empty() || k.contains([' ', '\t']) {
            return Err(bad());
        }
        headers.push((k, v.trim()));
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            return Err((
                "405 Method Not Allowed",
                "only GET and HEAD\n",
                vec![("Allow", "GET, HEAD")],
            ))
        }
    };
    let path = target.split(['?', '#']).next().unwrap_or_default();
    Ok(Request {
        head_only,
        path,
        headers,
    })
}

/// The bytes a `Range` header asks of a body of `len` bytes: `Ok(None)` for the whole body
/// (no header, or one this server does not serve in part: several ranges, other units,
/// malformed ones, all ignored as RFC 9110 allows), `Err(())` when it lies past the end (416).
fn range(header: Option<&str>, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return Ok(None);
    };
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Ok(None);
    };
    let num = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let (first, last) = match (a, num(a), num(b)) {
        ("", _, Some(n)) if n > 0 => (len.saturating_sub(n), len.saturating_sub(1)),
        (_, Some(f), None) if b.is_empty() => (f, len.saturating_sub(1)),
        (_, Some(f), Some(l)) if f <= l => (f, l.min(len.saturating_sub(1))),
        _ => return Ok(None),
    };
    if first >= len {
        return Err(());
    }
    Ok(Some((first, last)))
}

fn respond(site: &Site, stream: &mut TcpStream) -> io::Result<()> {
    let head = read_head(stream)?;
    let mut w = BufWriter::new(stream);
    let Some(head) = head else {
        return plain(&mut w, BAD_REQUEST, "request too large\n", vec![]);
    };
    let req = match parse(&head) {
        Ok(r) => r,
        Err((status, body, extra)) => return plain(&mut w, status, body, extra),
    };
    if !site.allow_remote && req.header("host").is_some_and(|h| !loopback_host(h)) {
        return plain(&mut w, "403 Forbidden", "not a loopback Host\n", vec![]);
    }
    if req.path == "/" || req.path == "/index.html" {
        let extra = vec![("Content-Security-Policy", site.csp.as_str())];
        let mut body = io::Cursor::new(site.page.as_bytes());
        return send(&mut w, &req, "text/html; charset=utf-8", &mut body, extra);
    }
    let Some((_, file)) = site.files.iter().find(|(url, _)| url == req.path) else {
        return plain(&mut w, "404 Not Found", "not found\n", vec![]);
    };
    let Ok(mut f) = std::fs::File::open(file) else {
        return plain(&mut w, "404 Not Found", "the file is gone\n", vec![]);
    };
    send(&mut w, &req, "application/octet-stream", &mut f, vec![])
}

/// Answers with `body` whole (200) or the part its `Range` asks for (206, or 416).
fn send(
    w: &mut impl Write,
    req: &Request<'_>,
    content_type: &str,
    body: &mut (impl Read + Seek),
    extra: Vec<(&str, &str)>,
) -> io::Result<()> {
    let len = body.seek(SeekFrom::End(0))?;
    let part = range(req.header("range"), len);
    let content_range = match part {
        Ok(None) => None,
        Ok(Some((a, b))) => Some(format!("bytes {a}-{b}/{len}")),
        Err(()) => Some(format!("bytes */{len}")),
    };
    let mut extra: Vec<(&str, &str)> = extra;
    extra.push(("Accept-Ranges", "bytes"));
    if let Some(c) = content_range.as_deref() {
        extra.push(("Content-Range", c));
    }
    let (status, first, count) = match part {
        Ok(None) => ("200 OK", 0, len),
        Ok(Some((a, b))) => ("206 Partial Content", a, b - a + 1),
        Err(()) => {
            let body = "range not satisfiable\n";
            return plain(w, "416 Range Not Satisfiable", body, extra);
        }
    };
    let reply = Reply {
        status,
        content_type,
        length: count,
        extra,
    };
    write_head(w, &reply)?;
    if !req.head_only {
        body.seek(SeekFrom::Start(first))?;
        io::copy(&mut body.take(count), w)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_pass() {
        for h in [
            "127.0.0.1:8080",
            "localhost:9000",
            "LOCALHOST",
            "[::1]:8080",
            "127.1.2.3",
        ] {
            assert!(loopback_host(h), "{h}");
        }
        for h in [
            "evil.example:8080",
            "10.0.0.1:8080",
            "[fe80::1]:80",
            "localhost.evil.example",
            "",
        ] {
            assert!(!loopback_host(h), "{h}");
        }
    }

    #[test]
    fn bind_addresses() {
        assert!(matches!(parse_bind("localhost"), Ok(ip) if ip.is_loopback()));
        assert!(matches!(parse_bind("::1"), Ok(ip) if ip.is_loopback()));
        assert!(matches!(parse_bind("[::1]"), Ok(ip) if ip.is_loopback()));
        assert!(matches!(parse_bind("0.0.0.0"), Ok(ip) if !ip.is_loopback()));
        assert!(parse_bind("gpu-node").is_err());
    }

    #[test]
    fn ranges() {
        assert_eq!(range(None, 100), Ok(None));
        assert_eq!(range(Some("bytes=0-9"), 100), Ok(Some((0, 9))));
        assert_eq!(range(Some("bytes=90-"), 100), Ok(Some((90, 99))));
        assert_eq!(range(Some("bytes=-10"), 100), Ok(Some((90, 99))));
        assert_eq!(range(Some("bytes=-500"), 100), Ok(Some((0, 99))));
        assert_eq!(range(Some("bytes=50-500"), 100), Ok(Some((50, 99))));
        assert_eq!(range(Some("bytes=100-"), 100), Err(()));
        assert_eq!(range(Some("bytes=0-0"), 0), Err(()));
        for ignored in [
            "bytes=0-1,5-6",
            "bytes=9-1",
            "bytes=-0",
            "bytes=a-b",
            "items=0-1",
            "bytes=+1-2",
            "bytes=99999999999999999999-",
        ] {
            assert_eq!(range(Some(ignored), 100), Ok(None), "{ignored}");
        }
    }

    #[test]
    fn request_heads() {
        let ok =
            parse(b"GET /files/0/a.pickle?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=0-1");
        let r = ok.unwrap_or_else(|e| panic!("{}", e.0));
        assert_eq!((r.path, r.head_only), ("/files/0/a.pickle", false));
        assert_eq!(r.header("RANGE"), Some("bytes=0-1"));
        for bad in [
            &b"GARBAGE"[..],
            b"GET / HTTP/2.0",
            b"GET  / HTTP/1.1",
            b"GET http://127.0.0.1/ HTTP/1.1",
            b"GET * HTTP/1.1",
            b"GET / HTTP/1.1 extra",
            b"GET / HTTP/1.1\r\nno colon",
            b"GET / HTTP/1.1\r\n folded: value",
            b"GET / HTTP/1.1\r\nHost: a\x00b",
            b"GET /\xff HTTP/1.1",
        ] {
            let got = parse(bad).err().map(|e| e.0);
            assert_eq!(got, Some(BAD_REQUEST), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(
            parse(b"POST / HTTP/1.1").err().map(|e| e.0),
            Some("405 Method Not Allowed")
        );
    }

    #[test]
    fn names_are_percent_encoded() {
        assert_eq!(url_encode("a b/é.pickle"), "a%20b%2F%C3%A9.pickle");
    }
}
