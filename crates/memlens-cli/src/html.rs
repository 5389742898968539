//! `memlens html`: the whole viewer as one HTML file, carried inside the binary (build.rs embeds
//! dist-single/memlens.html). With no snapshot it writes that file byte for byte, the way to take
//! memlens onto an air-gapped laptop; with snapshots it writes a report: the same page with the
//! snapshots embedded (gzip, then base64, unpacked by the browser's DecompressionStream) that
//! opens from disk already showing them in the chosen view. This is the offline, frozen
//! replacement for `_memory_viz trace_plot`/`segment_plot`, whose pages load their code from CDNs.
//!
//! The page keeps one slot for what to open at start (`PRELOAD_SLOT`, a JSON data block that no
//! CSP hash covers); `memlens serve` fills the same slot with URLs.

use crate::fmt::Bytes;
use crate::load::{load, open, read_bytes, CliError};
use base64::Engine;
use flate2::write::GzEncoder;
use flate2::Compression;
use memlens_core::view::View;
use std::io::{self, Read, Write};
use std::path::Path;

include!(concat!(env!("OUT_DIR"), "/viewer.rs"));

/// The element of the single-file page that lists the files to open at start (written by
/// scripts/single_file.py, read by web/assets/single.js).
pub const PRELOAD_SLOT: &str =
    r#"<script type="application/json" id="memlens-preload">null</script>"#;

/// The single-file viewer this binary carries, or how to build a binary that carries it.
pub fn viewer() -> Result<&'static str, CliError> {
    match VIEWER_HTML {
        Some(v) if v.contains(PRELOAD_SLOT) => Ok(v),
        Some(_) => Err(CliError(
            "the embedded viewer has no preload slot: rebuild it with `bash scripts/serve.sh --build`, then `cargo build --release -p memlens-cli`".into(),
        )),
        None => Err(CliError(
            "this memlens was built without the viewer: run `bash scripts/serve.sh --build` (trunk build, then python3 scripts/single_file.py writes dist-single/memlens.html), then rebuild memlens with `cargo build --release -p memlens-cli`".into(),
        )),
    }
}

/// The page's own Content-Security-Policy (from its `<meta>`), to send as a header too.
pub fn viewer_csp(viewer: &str) -> Option<&str> {
    let start = r#"<meta http-equiv="Content-Security-Policy" content=""#;
    let rest = viewer.get(viewer.find(start)? + start.len()..)?;
    rest.get(..rest.find('"')?)
}

/// `--view KEY`: one of the viewer's `#view=` keys ([`View::key`]).
fn parse_view(s: &str) -> Result<View, String> {
    View::from_key(s).ok_or_else(|| {
        let keys: Vec<&str> = View::ALL.iter().map(|v| v.key()).collect();
        format!("unknown view {s:?}; one of: {}", keys.join(", "))
    })
}

#[derive(clap::Args)]
pub struct Args {
    /// Snapshots to embed (pickle of any protocol, JSON, or _memory_viz HTML; `-` reads stdin).
    /// None: write the viewer alone, which opens files dropped on it.
    snapshots: Vec<String>,
    /// HTML file to write (`-`: stdout). Default: memlens.html without snapshots, else
    /// <snapshot file name>.html in the current folder (memlens-report.html for several).
    #[arg(short, long)]
    output: Option<String>,
    /// The view the report opens in: timeline (Active Memory Timeline), allocated (Allocated
    /// Memory incl. Private Pools), state (Allocator State History), segments (Active Cached
    /// Segment Timeline) or settings (Allocator Settings).
    #[arg(long, value_parser = parse_view)]
    view: Option<View>,
}

/// One file for the page to open at start.
pub enum Preload {
    /// Fetched from the page's own origin (`memlens serve`).
    Url { name: String, url: String },
    /// Embedded in the page: gzip + base64 of the file's bytes.
    Embedded { name: String, base64: String },
}

/// The viewer with `files` (and the starting view) in its preload slot. Embedded files go in
/// data blocks after the slot; names are JSON with `<` escaped, so nothing can close the element.
pub fn page_with(viewer: &str, files: &[Preload], view: Option<View>) -> Result<String, CliError> {
    let mut list = Vec::new();
    let mut blocks = String::new();
    for (i, f) in files.iter().enumerate() {
        match f {
            Preload::Url { name, url } => {
                list.push(serde_json::json!({ "name": name, "url": url }))
            }
            Preload::Embedded { name, base64 } => {
                let id = format!("memlens-file-{i}");
                blocks.push_str(&format!(
                    "<script type=\"application/octet-stream\" id=\"{id}\">{base64}</script>\n"
                ));
                list.push(serde_json::json!({ "name": name, "block": id }));
            }
        }
    }
    let mut pre = serde_json::json!({ "files": list });
    if let (Some(v), Some(obj)) = (view, pre.as_object_mut()) {
        obj.insert("view".into(), v.key().into());
    }
    let json = pre.to_string().replace('<', "\\u003c");
    let slot = format!(
        "<script type=\"application/json\" id=\"memlens-preload\">{json}</script>\n{blocks}"
    );
    let at = viewer
        .find(PRELOAD_SLOT)
        .ok_or_else(|| CliError("the embedded viewer has no preload slot".into()))?;
    let mut page = String::with_capacity(viewer.len() + slot.len());
    page.push_str(viewer.get(..at).unwrap_or_default());
    page.push_str(slot.trim_end());
    page.push_str(viewer.get(at + PRELOAD_SLOT.len()..).unwrap_or_default());
    Ok(page)
}

/// Counts the bytes read through it.
struct Counted<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n += k as u64;
        Ok(k)
    }
}

/// gzip (best compression) then base64 of everything `r` gives: (bytes read, base64 text).
pub fn gzip_base64(r: impl Read) -> io::Result<(u64, String)> {
    let mut r = Counted { inner: r, n: 0 };
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    io::copy(&mut r, &mut enc)?;
    let gz = enc.finish()?;
    Ok((r.n, base64::engine::general_purpose::STANDARD.encode(gz)))
}

fn file_name(path: &str) -> String {
    if path == "-" {
        return "stdin".into();
    }
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

/// Checks that `path` is a snapshot memlens reads (exit 2 otherwise), then embeds its bytes.
fn embed(path: &str) -> Result<(Preload, u64), CliError> {
    let name = file_name(path);
    let (size, base64) = if path == "-" {
        let bytes = read_bytes(path)?;
        memlens_core::load(&bytes).map_err(|e| CliError(format!("{e}: <stdin>")))?;
        gzip_base64(bytes.as_slice())
    } else {
        // Decoded first (streaming, the model dropped after), so a report never embeds a file
        // the viewer would refuse; then the file itself is compressed as it is read.
        // A gzip file is embedded decompressed (then compressed again, as every report is).
        drop(load(path)?);
        gzip_base64(open(path)?.0)
    }
    .map_err(|e| CliError(format!("cannot read file: {e}: {path}")))?;
    Ok((Preload::Embedded { name, base64 }, size))
}

fn percent(part: usize, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

pub fn run(a: Args) -> Result<(), CliError> {
    let viewer = viewer()?;
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| match a.snapshots.as_slice() {
            [] => "memlens.html".into(),
            [one] if one == "-" => "snapshot.html".into(),
            [one] => format!("{}.html", file_name(one)),
            _ => "memlens-report.html".into(),
        });
    let target = std::fs::canonicalize(&out).ok();
    if let Some(s) = a
        .snapshots
        .iter()
        .find(|s| target.is_some() && std::fs::canonicalize(s).ok() == target)
    {
        return Err(CliError(format!(
            "the report would overwrite its own snapshot (choose another -o): {s}"
        )));
    }
    let mut files = Vec::new();
    let mut notes = Vec::new();
    for s in &a.snapshots {
        let (p, size) = embed(s)?;
        if let Preload::Embedded { name, base64 } = &p {
            notes.push(format!(
                "{name} ({}) embedded as {} of gzip+base64 ({} of the file)",
                Bytes::from(size),
                Bytes::from(base64.len() as u64),
                percent(base64.len(), size)
            ));
        }
        files.push(p);
    }
    let page = if files.is_empty() && a.view.is_none() {
        viewer.to_string()
    } else {
        page_with(viewer, &files, a.view)?
    };
    let what = if files.is_empty() {
        "the memlens viewer, one file that opens from disk with no server and no network".into()
    } else {
        let view = a.view.unwrap_or(View::Timeline).key();
        format!(
            "the viewer ({}) and {}; opens from disk in view {view}",
            Bytes::from(viewer.len() as u64),
            notes.join(", ")
        )
    };
    let msg = format!("wrote {out}: {} = {what}", Bytes::from(page.len() as u64));
    if out == "-" {
        let mut so = io::stdout().lock();
        match so.write_all(page.as_bytes()).and_then(|()| so.flush()) {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                return Err(CliError(format!("cannot write output: {e}")))
            }
            _ => {}
        }
        eprintln!("{msg}");
        return Ok(());
    }
    std::fs::write(&out, page.as_bytes())
        .map_err(|e| CliError(format!("cannot write file: {e}: {out}")))?;
    println!("{msg}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAKE: &str = "<head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; connect-src 'self'\" />\n<script type=\"application/json\" id=\"memlens-preload\">null</script>\n</head>";

    #[test]
    fn preload_slot_gets_files_view_and_blocks() {
        let files = [
            Preload::Url {
                name: "a.pickle".into(),
                url: "files/0/a.pickle".into(),
            },
            Preload::Embedded {
                name: "</script><b>.pickle".into(),
                base64: "QUJD".into(),
            },
        ];
        let page = page_with(FAKE, &files, Some(View::Segments)).unwrap_or_default();
        assert!(page.contains(r#""view":"segments""#), "{page}");
        assert!(
            page.contains(r#"{"name":"a.pickle","url":"files/0/a.pickle"}"#),
            "{page}"
        );
        assert!(
            page.contains(
                r#"<script type="application/octet-stream" id="memlens-file-1">QUJD</script>"#
            ),
            "{page}"
        );
        // The hostile name cannot close the JSON element.
        assert!(page.contains(r#"\u003c/script>\u003cb>.pickle"#), "{page}");
        assert_eq!(page.matches("</script>").count(), 2, "{page}");
        assert!(!page.contains(PRELOAD_SLOT));
        assert!(page.ends_with("</head>"));
    }

    #[test]
    fn csp_is_read_from_the_meta() {
        assert_eq!(
            viewer_csp(FAKE),
            Some("default-src 'none'; connect-src 'self'")
        );
        assert_eq!(viewer_csp("<head></head>"), None);
    }

    #[test]
    fn gzip_base64_round_trips() {
        use base64::Engine;
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let (n, b64) = gzip_base64(data.as_slice()).unwrap_or_default();
        assert_eq!(n, data.len() as u64);
        let gz = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap_or_default();
        let mut back = Vec::new();
        let r = flate2::read::GzDecoder::new(gz.as_slice()).read_to_end(&mut back);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(back, data);
        assert!(gz.len() < data.len() / 10, "compressed to {}", gz.len());
    }
}
