//! `memlens html` and `memlens serve` through the real binary: the viewer written byte for byte,
//! a report embedding a snapshot (decoded back here), bad input, and real HTTP requests to the
//! server on 127.0.0.1, with a non-loopback bind refused. The page itself is exercised in
//! headless browsers by tests/browser/offline.test.mjs.
//!
//! A binary built before the viewer (dist-single/memlens.html) must say how to build it; the
//! checks that need the viewer then print a NOTICE, unless MEMLENS_REQUIRE_VIEWER is set (as
//! scripts/test.sh does, after building the viewer first), which makes them fail instead.

use base64::Engine;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{good_snapshot, run, scratch_dir};

/// One line on stderr starting `memlens: `, exit 2, nothing on stdout.
fn assert_one_line_error(r: &(i32, String, String), fragment: &str) -> String {
    let (code, stdout, stderr) = r;
    assert_eq!(*code, 2, "exit status; stderr: {stderr}");
    assert!(stdout.is_empty(), "stdout: {stdout}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.starts_with("memlens: "), "{stderr}");
    assert!(stderr.contains(fragment), "want {fragment:?} in {stderr}");
    stderr.trim_end().to_string()
}

/// Whether this binary carries the viewer; when it does not, checks the message that says so.
fn has_viewer(dir: &Path) -> bool {
    let out = dir.join("probe.html");
    let r = run(&["html", "-o", &out.to_string_lossy()]);
    if r.0 == 0 {
        return true;
    }
    let line = assert_one_line_error(&r, "built without the viewer");
    assert!(line.contains("scripts/serve.sh --build"), "{line}");
    assert!(!out.exists());
    assert!(
        std::env::var_os("MEMLENS_REQUIRE_VIEWER").is_none(),
        "MEMLENS_REQUIRE_VIEWER is set but memlens has no viewer: build the web (bash scripts/serve.sh --build) before memlens"
    );
    println!(
        "NOTICE: memlens was built without the viewer; html/serve checks that need it are skipped"
    );
    false
}

fn embedded_file(page: &str, id: &str) -> Vec<u8> {
    let open = format!("<script type=\"application/octet-stream\" id=\"{id}\">");
    let start = page.find(&open).unwrap_or_else(|| panic!("no block {id}")) + open.len();
    let len = page
        .get(start..)
        .and_then(|s| s.find("</script>"))
        .unwrap_or_else(|| panic!("unterminated block {id}"));
    let b64 = page.get(start..start + len).unwrap_or_default();
    let gz = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    out
}

#[test]
fn html_writes_the_viewer_and_reports() {
    let dir = scratch_dir("html");
    if !has_viewer(&dir) {
        return;
    }
    // Without a snapshot: exactly the single file the build made.
    let viewer = dir.join("memlens.html");
    let (code, stdout, stderr) = run(&["html", "-o", &viewer.to_string_lossy()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("wrote "), "{stdout}");
    let page = std::fs::read_to_string(&viewer).unwrap_or_else(|e| panic!("{e}"));
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist-single/memlens.html");
    if std::env::var_os("MEMLENS_VIEWER_HTML").is_none() {
        if let Ok(b) = std::fs::read_to_string(&built) {
            assert!(b == page, "memlens html differs from {}", built.display());
        }
    }
    assert!(page.contains(r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'sha256-"#));
    assert!(page.contains(r#"<script type="application/json" id="memlens-preload">null</script>"#));
    assert!(
        page.contains("; connect-src 'none';"),
        "the file may fetch nothing"
    );
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "a remote URL in the page"
    );

    // A report: the snapshot embedded compactly, the view chosen.
    let good = good_snapshot(&dir, "good snapshot.pickle");
    let report = dir.join("report.html");
    let (code, stdout, stderr) = run(&[
        "html",
        &good.to_string_lossy(),
        "-o",
        &report.to_string_lossy(),
        "--view",
        "segments",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("embedded as") && stdout.contains("view segments"),
        "{stdout}"
    );
    let rep = std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{e}"));
    let slot = r#"<script type="application/json" id="memlens-preload">"#;
    let json = rep
        .split(slot)
        .nth(1)
        .and_then(|s| s.split("</script>").next())
        .unwrap_or_else(|| panic!("no preload slot"));
    let pre: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        pre,
        serde_json::json!({"files": [{"name": "good snapshot.pickle", "block": "memlens-file-0"}], "view": "segments"})
    );
    let bytes = std::fs::read(&good).unwrap_or_default();
    assert_eq!(embedded_file(&rep, "memlens-file-0"), bytes);
    // Everything else is the viewer, unchanged.
    assert_eq!(
        rep.matches("<script").count(),
        page.matches("<script").count() + 1
    );

    // The default name is the snapshot's, with .html added, in the current folder.
    let out = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(["html", &good.to_string_lossy()])
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    assert!(dir.join("good snapshot.pickle.html").is_file());

    // Bad input: one line naming the file last, nothing written.
    let bad = dir.join("bad.pickle");
    std::fs::write(&bad, b"\x80\x04\xff.").unwrap_or_else(|e| panic!("{e}"));
    let bad_s = bad.to_string_lossy().into_owned();
    let not_written = dir.join("not-written.html");
    let line = assert_one_line_error(
        &run(&["html", &bad_s, "-o", &not_written.to_string_lossy()]),
        "unknown pickle opcode",
    );
    assert!(line.ends_with(&format!(": {bad_s}")), "{line}");
    assert!(!not_written.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_refuses_non_loopback_addresses() {
    let dir = scratch_dir("serve-bind");
    let good = good_snapshot(&dir, "good snapshot.pickle");
    let g = good.to_string_lossy().into_owned();
    for addr in ["0.0.0.0", "::", "10.1.2.3", "192.168.0.7"] {
        let line = assert_one_line_error(
            &run(&["serve", "--bind", addr, "--port", "0", &g]),
            "refusing to listen on",
        );
        assert!(line.contains("--allow-remote"), "{line}");
    }
    assert_one_line_error(
        &run(&["serve", "--bind", "gpu-node", &g]),
        "--bind wants an IP address",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kills the server when the test ends, passing or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends one raw request; returns (status line, headers, body).
fn request(addr: &str, raw: &str) -> (String, String, Vec<u8>) {
    request_bytes(addr, raw.as_bytes())
}

/// Sends raw bytes; the answer must come within 30 s.
fn request_bytes(addr: &str, raw: &[u8]) -> (String, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    let raw_text = String::from_utf8_lossy(raw);
    let _ = s.write_all(raw);
    let mut resp = Vec::new();
    s.read_to_end(&mut resp)
        .unwrap_or_else(|e| panic!("{e}: after sending {raw_text:.60}"));
    let end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end: {}", String::from_utf8_lossy(&resp)));
    let head = String::from_utf8_lossy(resp.get(..end).unwrap_or_default()).into_owned();
    let body = resp.get(end + 4..).unwrap_or_default().to_vec();
    let (status, headers) = head.split_once("\r\n").unwrap_or((&head, ""));
    (status.to_string(), headers.to_string(), body)
}

fn get(addr: &str, path: &str) -> (String, String, Vec<u8>) {
    request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
    )
}

/// A running `memlens serve FILES --port 0 EXTRA...` and its address (`127.0.0.1:PORT`); its
/// stdout is kept open (the server may still write to it).
struct Running {
    addr: String,
    _server: Server,
    _out: Option<BufReader<std::process::ChildStdout>>,
}

fn start_server(files: &[&Path], extra: &[&str]) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .arg("serve")
        .args(files)
        .args(["--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = child.stdout.take();
    let server = Server(child);
    let mut first = String::new();
    let mut out = stdout.map(BufReader::new);
    if let Some(out) = out.as_mut() {
        out.read_line(&mut first).unwrap_or_else(|e| panic!("{e}"));
    }
    // "memlens: serving the viewer with 1 file(s) at http://127.0.0.1:PORT/ (Ctrl-C to stop)"
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .unwrap_or_else(|| panic!("no URL in {first:?}"))
        .to_string();
    Running {
        addr,
        _server: server,
        _out: out,
    }
}

/// A scratch folder holding the good snapshot, served alone; `None` (after a NOTICE) when this
/// binary has no viewer.
fn serving(tag: &str) -> Option<(PathBuf, PathBuf, Running)> {
    let dir = scratch_dir(tag);
    if !has_viewer(&dir) {
        return None;
    }
    let good = good_snapshot(&dir, "good snapshot.pickle");
    let running = start_server(&[&good], &[]);
    Some((dir, good, running))
}

#[test]
fn serve_answers_real_http_requests_on_loopback() {
    let Some((dir, good, running)) = serving("serve") else {
        return;
    };
    let addr = running.addr.clone();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    let (status, headers, body) = get(&addr, "/");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("Content-Type: text/html"), "{headers}");
    assert!(
        headers.contains("Content-Security-Policy: default-src 'none'; script-src 'sha256-"),
        "{headers}"
    );
    assert!(headers.contains("frame-ancestors 'none'"), "{headers}");
    assert!(headers.contains("connect-src 'self'"), "{headers}");
    assert!(headers.contains("Cache-Control: no-store"), "{headers}");
    let page = String::from_utf8_lossy(&body);
    assert!(
        page.contains(r#""url":"files/0/good%20snapshot.pickle""#)
            && page.contains(r#""name":"good snapshot.pickle""#),
        "preload"
    );

    let (status, headers, body) = get(&addr, "/files/0/good%20snapshot.pickle");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("Cache-Control: no-store"), "{headers}");
    assert_eq!(body, std::fs::read(&good).unwrap_or_default());

    let (status, headers, body) = request(
        &addr,
        "HEAD /files/0/good%20snapshot.pickle HTTP/1.1\r\nHost: localhost:9999\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.is_empty());
    let len = std::fs::metadata(&good).map(|m| m.len()).unwrap_or(0);
    assert!(
        headers.contains(&format!("Content-Length: {len}")),
        "{headers}"
    );

    // Only the table's paths exist: no file system behind them.
    for path in [
        "/../../../../etc/passwd",
        "/files/0/../../../../etc/passwd",
        "/files/1/good%20snapshot.pickle",
        "/files/0/other.pickle",
        "/etc/passwd",
        "/good%20snapshot.pickle",
        "/%2e%2e/%2e%2e/etc/passwd",
    ] {
        assert_eq!(get(&addr, path).0, "HTTP/1.1 404 Not Found", "{path}");
    }
    let (status, headers, _) = request(
        &addr,
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    assert!(headers.contains("Allow: GET, HEAD"));
    // DNS rebinding: a page of another site resolving its name to 127.0.0.1 is refused.
    let (status, _, _) = request(&addr, "GET / HTTP/1.1\r\nHost: evil.example:8080\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 403 Forbidden");
    // Requests are bounded.
    let big = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let mut s = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{e}"));
    let _ = s.write_all(big.as_bytes());
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp:.80}");
    assert_eq!(
        request(&addr, "GARBAGE\r\n\r\n").0,
        "HTTP/1.1 400 Bad Request"
    );
    drop(running);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Beside the served snapshot; no path may reach it.
const SECRET: &str = "memlens-secret-9f3c";

fn refused(status: &str, body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    (status == "HTTP/1.1 404 Not Found" || status == "HTTP/1.1 400 Bad Request")
        && !text.contains(SECRET)
        && !text.contains("root:")
}

#[test]
fn serve_refuses_path_traversal_in_every_encoding() {
    let Some((dir, _, running)) = serving("serve-traversal") else {
        return;
    };
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, SECRET).unwrap_or_else(|e| panic!("{e}"));
    let abs = secret.to_string_lossy().into_owned();
    let mut paths: Vec<String> = [
        "/files/0/../secret.txt",
        "/files/0/%2e%2e/secret.txt",
        "/files/0/%2e%2e%2fsecret.txt",
        "/files/0/%2E%2E%2Fsecret.txt",
        "/files/0/..%2fsecret.txt",
        "/files/0/..%5csecret.txt",
        "/files/0/..\\secret.txt",
        "/files/0/%252e%252e%252fsecret.txt",
        "/files/0/%c0%ae%c0%ae/secret.txt",
        "/files/0/good%20snapshot.pickle/../secret.txt",
        "/files/0/good%20snapshot.pickle/..%2f..%2fsecret.txt",
        "/files/0/good%20snapshot.pickle%00.txt",
        "/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/..%2f..%2f..%2fetc%2fpasswd",
        "//etc/passwd",
        "/etc/passwd",
        "http://127.0.0.1/etc/passwd",
        "file:///etc/passwd",
        "C:\\Windows\\win.ini",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    paths.push(abs.clone());
    paths.push(format!("/{abs}"));
    paths.push(format!(
        "/files/0/..%2f..%2f..%2f..%2f..%2f..%2f..%2f..{}",
        abs.replace('/', "%2f")
    ));
    for path in &paths {
        for method in ["GET", "HEAD"] {
            let raw = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            let (status, _, body) = request(&running.addr, &raw);
            assert!(refused(&status, &body), "{method} {path}: {status}");
        }
    }
    // The real file is still served: the refusals are not a server that refuses everything.
    assert_eq!(
        get(&running.addr, "/files/0/good%20snapshot.pickle").0,
        "HTTP/1.1 200 OK"
    );
    drop(running);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_answers_malformed_and_oversized_requests_400_and_keeps_serving() {
    let Some((dir, good, running)) = serving("serve-malformed") else {
        return;
    };
    let long_line = format!(
        "GET /{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "a".repeat(20_000)
    );
    let many_headers = format!("GET / HTTP/1.1\r\n{}\r\n", "X-A: b\r\n".repeat(3_000));
    let mut junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    junk.extend_from_slice(b"\r\n\r\n");
    let cases: Vec<Vec<u8>> = vec![
        long_line.into_bytes(),
        many_headers.into_bytes(),
        junk,
        b"GARBAGE\r\n\r\n".to_vec(),
        b"GET /\r\nHost: 127.0.0.1\r\n\r\n".to_vec(),
        b"GET / HTTP/9.9\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1 trailing\r\n\r\n".to_vec(),
        b"GET  /  HTTP/1.1\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nno colon here\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\n folded: header\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\x00evil\r\n\r\n".to_vec(),
        b"GET /\xff\xfe HTTP/1.1\r\n\r\n".to_vec(),
        b"\r\n\r\n".to_vec(),
    ];
    for raw in &cases {
        let (status, _, _) = request_bytes(&running.addr, raw);
        assert_eq!(
            status,
            "HTTP/1.1 400 Bad Request",
            "{:.80}",
            String::from_utf8_lossy(raw)
        );
    }
    // A client that sends half a request and leaves does not stop the server.
    for _ in 0..20 {
        let mut s = TcpStream::connect(&running.addr).unwrap_or_else(|e| panic!("{e}"));
        let _ = s.write_all(b"GET /files/0/good%20snap");
    }
    let (status, _, body) = get(&running.addr, "/files/0/good%20snapshot.pickle");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body, std::fs::read(&good).unwrap_or_default());
    drop(running);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_answers_a_real_request_beside_100_idle_connections_and_drops_them() {
    let Some((dir, good, running)) = serving("serve-idle") else {
        return;
    };
    let mut idle: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(&running.addr).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    // Half of them send the start of a request line and stall (slowloris).
    for s in idle.iter_mut().step_by(2) {
        let _ = s.write_all(b"GET / HT");
    }
    let t = Instant::now();
    let (status, _, body) = get(&running.addr, "/files/0/good%20snapshot.pickle");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body, std::fs::read(&good).unwrap_or_default());
    // Waiting for the idle ones to time out (10 s) would mean they blocked it.
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "answered after {:?}",
        t.elapsed()
    );
    // The server lets go of a stalled connection by itself: it closes it within its deadline.
    let s = &mut idle[0];
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut rest = Vec::new();
    let closed = s.read_to_end(&mut rest);
    assert!(closed.is_ok() && rest.is_empty(), "{closed:?} {rest:?}");
    drop(idle);
    drop(running);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_handles_head_and_range() {
    let dir = scratch_dir("serve-range");
    if !has_viewer(&dir) {
        return;
    }
    let good = good_snapshot(&dir, "good snapshot.pickle");
    let bytes = std::fs::read(&good).unwrap_or_default();
    let len = bytes.len();
    assert!(len > 100);
    let running = start_server(&[&good], &[]);
    let addr = &running.addr;
    let file = "/files/0/good%20snapshot.pickle";
    let ask = |method: &str, range: &str| {
        request(
            addr,
            &format!("{method} {file} HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: {range}\r\n\r\n"),
        )
    };
    let (status, headers, body) = ask("GET", "bytes=0-9");
    assert_eq!(status, "HTTP/1.1 206 Partial Content");
    assert!(
        headers.contains(&format!("Content-Range: bytes 0-9/{len}")),
        "{headers}"
    );
    assert!(headers.contains("Content-Length: 10"), "{headers}");
    assert_eq!(body, bytes[..10]);
    let (status, _, body) = ask("GET", "bytes=-7");
    assert_eq!(status, "HTTP/1.1 206 Partial Content");
    assert_eq!(body, bytes[len - 7..]);
    let (status, _, body) = ask("GET", &format!("bytes={}-", len - 20));
    assert_eq!(status, "HTTP/1.1 206 Partial Content");
    assert_eq!(body, bytes[len - 20..]);
    let (status, headers, _) = ask("GET", &format!("bytes={len}-"));
    assert_eq!(status, "HTTP/1.1 416 Range Not Satisfiable");
    assert!(
        headers.contains(&format!("Content-Range: bytes */{len}")),
        "{headers}"
    );
    let (status, _, body) = ask("GET", "bytes=0-1,5-6");
    assert_eq!(status, "HTTP/1.1 200 OK", "several ranges: the whole file");
    assert_eq!(body, bytes);
    let (status, headers, body) = ask("HEAD", "bytes=10-19");
    assert_eq!(status, "HTTP/1.1 206 Partial Content");
    assert!(headers.contains("Content-Length: 10"), "{headers}");
    assert!(body.is_empty());
    let (_, _, page) = get(addr, "/");
    let (status, headers, body) = request(addr, "HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains(&format!("Content-Length: {}", page.len())),
        "{headers}"
    );
    assert!(headers.contains("Accept-Ranges: bytes"), "{headers}");
    assert!(body.is_empty());
    drop(running);
    let _ = std::fs::remove_dir_all(&dir);
}
