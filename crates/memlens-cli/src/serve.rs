//! `memlens serve`: the viewer with snapshots already open, for a remote GPU node reached
//! through an SSH port forward (`ssh -L 8080:127.0.0.1:8080 node`). A tiny HTTP/1.1 server on
//! std::net that listens on 127.0.0.1 unless told otherwise (`--allow-remote`), answers GET and
//! HEAD only, reads at most `MAX_HEAD_BYTES` of a request, refuses Host names that are not
//! loopback (DNS rebinding), and serves exactly two kinds of path from a fixed table: the
//! embedded single-file viewer at `/`, and each file named on the command line at
//! `/files/<n>/<name>`. No path reaches the file system, so no path can escape.

use crate::html::{page_with, viewer, viewer_csp, Preload};
use crate::load::CliError;
use std::io::{self, BufWriter, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The most a request line plus headers may take.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Connections handled at once; more are closed unanswered.
const MAX_CONNECTIONS: usize = 64;

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
            .spawn(move || {
                if let Err(e) = handle(&site, stream) {
                    if !matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe
                            | io::ErrorKind::ConnectionReset
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

/// Reads the request head (up to the blank line); `None` when it is longer than allowed.
fn read_head(stream: &mut TcpStream) -> io::Result<Option<String>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
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
            return Ok(Some(String::from_utf8_lossy(&head).into_owned()));
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
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
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

fn respond(site: &Site, stream: &mut TcpStream) -> io::Result<()> {
    let head = read_head(stream)?;
    let mut w = BufWriter::new(stream);
    let Some(head) = head else {
        return plain(
            &mut w,
            "431 Request Header Fields Too Large",
            "request too large\n",
            vec![],
        );
    };
    let mut lines = head.split("\r\n");
    let request = lines.next().unwrap_or_default();
    let mut parts = request.split(' ');
    let (method, target, version) = (parts.next(), parts.next(), parts.next());
    let (Some(method), Some(target), Some(version)) = (method, target, version) else {
        return plain(&mut w, "400 Bad Request", "bad request\n", vec![]);
    };
    if !version.starts_with("HTTP/1.") || parts.next().is_some() {
        return plain(&mut w, "400 Bad Request", "bad request\n", vec![]);
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            return plain(
                &mut w,
                "405 Method Not Allowed",
                "only GET and HEAD\n",
                vec![("Allow", "GET, HEAD")],
            )
        }
    };
    if !site.allow_remote {
        let host = lines.find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case("host").then(|| v.trim())
        });
        if host.is_some_and(|h| !loopback_host(h)) {
            return plain(&mut w, "403 Forbidden", "not a loopback Host\n", vec![]);
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or_default();
    if path == "/" || path == "/index.html" {
        write_head(
            &mut w,
            &Reply {
                status: "200 OK",
                content_type: "text/html; charset=utf-8",
                length: site.page.len() as u64,
                extra: vec![("Content-Security-Policy", site.csp.as_str())],
            },
        )?;
        if !head_only {
            w.write_all(site.page.as_bytes())?;
        }
        return w.flush();
    }
    let Some((_, file)) = site.files.iter().find(|(url, _)| url == path) else {
        return plain(&mut w, "404 Not Found", "not found\n", vec![]);
    };
    let Ok(mut f) = std::fs::File::open(file) else {
        return plain(&mut w, "404 Not Found", "the file is gone\n", vec![]);
    };
    let length = f.metadata()?.len();
    write_head(
        &mut w,
        &Reply {
            status: "200 OK",
            content_type: "application/octet-stream",
            length,
            extra: vec![],
        },
    )?;
    if !head_only {
        io::copy(&mut (&mut f).take(length), &mut w)?;
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
    fn names_are_percent_encoded() {
        assert_eq!(url_encode("a b/é.pickle"), "a%20b%2F%C3%A9.pickle");
    }
}
